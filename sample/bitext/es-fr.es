El Gobierno anunció una subida del salario mínimo del 5 %.
¿Dónde puedo comprar un billete de metro?
Descargar el archivo adjunto
¿Qué haces aquí tan temprano?
Quiero dar las gracias a la ponente por su trabajo.
El formato del correo electrónico no es válido.
¿Tienen mesa para dos?
La policía detuvo a tres personas por el robo de una joyería en Bilbao.
Pablo, ven aquí ahora mismo.
Necesitamos una política agrícola más justa y sostenible.
Buscar en esta página
¿Este autobús va al centro?
El nuevo estadio tendrá capacidad para 55.000 espectadores.
No sé de qué me hablas.
Los Estados miembros deben cumplir sus compromisos.
No tiene permiso para acceder a esta carpeta.
¿Cuál es el horario de apertura?
La escritora mexicana Elena Vargas recibió un importante premio literario.
¡Cuidado! ¡Viene un coche!
Esta directiva protegerá mejor a los trabajadores de plataformas digitales.
Ver vista previa
¿Podría repetirlo, por favor?
Las lluvias torrenciales obligaron a evacuar a 1.500 personas en Murcia.
Te quiero, pero esto no puede seguir así.
El Parlamento ha demostrado hoy su unidad.
Seleccione al menos una opción.
¿Dónde se puede alquilar un coche?
El número de turistas en Canarias alcanzó un récord de 16 millones.
Anoche soñé contigo.
Lamento que el Consejo no esté presente en este debate.
Archivo guardado en la carpeta Descargas.
Una botella de agua sin gas, por favor.
Investigadores de Barcelona desarrollan un sensor que detecta el cáncer en la saliva.
¿Quién te crees que eres?
La igualdad de género debe ser una prioridad transversal.
Demasiados intentos. Inténtelo de nuevo en 10 minutos.
¿Cuánto se tarda en llegar al aeropuerto?
El equipo de baloncesto fichó al base argentino Diego Ferreyra por dos temporadas.
Déjame en paz.
Votaré en contra de este informe.
Mostrar más resultados
¿Hay descuento para estudiantes?
La sequía ha reducido la cosecha de trigo en un 30 %.
¿Estás bien? Pareces cansado.
Los consumidores tienen derecho a una información clara.
Su pedido llegará entre el 3 y el 5 de marzo.
¿Me puede cambiar este billete de 50 euros?
El alcalde de Granada inauguró una nueva biblioteca pública.
Nos vemos mañana en la oficina.
Se levanta la sesión.
