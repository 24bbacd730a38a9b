La aerolínea ofrecerá vuelos directos a Cancún a partir de noviembre.
¿Dónde está la estación de tren?
Abrir un archivo existente
¿Me estás escuchando?
Señora Presidenta, quisiera plantear una cuestión de orden.
La instalación ha fallado. Código de error: 1603.
¿Tienen el menú en inglés?
Un incendio forestal en la isla de La Palma quemó 500 hectáreas.
Javier, no es lo que parece.
La seguridad alimentaria es una prioridad para todos nosotros.
Cambiar el idioma de la interfaz
¿Cuánto cuesta una habitación individual?
El paro bajó en 40.000 personas en el mes de abril.
¡No me lo puedo creer!
Hay que reforzar la cooperación con los países vecinos.
El enlace ha caducado.
¿Hay wifi gratis en el hotel?
El ciclista colombiano Andrés Mejía ganó la etapa reina de la Vuelta.
Tranquila, todo va a salir bien.
Este acuerdo comercial beneficia a ambas partes.
Borrar el historial de navegación
Necesito ir al hospital.
Las ventas de coches eléctricos se duplicaron en 2023.
¿Dónde has estado toda la noche?
Debemos luchar contra la desinformación sin limitar la libertad de expresión.
Escriba un comentario...
¿Dónde puedo dejar las maletas?
El puerto de Algeciras movió 4,7 millones de contenedores el año pasado.
Hace años que no te veo.
Mi grupo votará a favor de esta propuesta.
¿Olvidó su contraseña?
Quisiera un café con leche y un cruasán.
Arqueólogos hallan restos de una villa romana en Mérida.
Eso no es asunto tuyo.
Los derechos de los pasajeros deben respetarse en todos los casos.
Compartir en redes sociales
¿A qué hora abre la farmacia?
La inflación en Argentina superó el 100 % anual.
Perdóname, Lucía. No quería hacerte daño.
La Unión debe invertir más en infraestructuras ferroviarias.
Volver a la página de inicio
Perdone, ¿sabe dónde hay una gasolinera?
El Betis fichó a un delantero brasileño por 12 millones de euros.
Llámame cuando llegues.
Este debate llega demasiado tarde.
Tamaño máximo del archivo: 10 MB
Me han robado la cartera.
La nueva línea de tranvía de Vitoria transportará 30.000 viajeros al día.
Feliz Navidad a todos.
Muchas gracias por su atención.
