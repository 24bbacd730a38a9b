El ayuntamiento de Valencia aprobó ayer un plan para reducir el tráfico en el centro.
¿Dónde está la parada de autobús más cercana?
Haga clic en «Aceptar» para continuar.
No me mires así, no he hecho nada.
Señor Presidente, este informe llega en un momento decisivo.
No se pudo conectar con el servidor.
¿Me puede traer la carta, por favor?
La empresa creará 800 puestos de trabajo en su nueva planta de Zaragoza.
Carlos, ¿has visto a mi hermana?
Debemos garantizar el acceso a la vivienda para los jóvenes.
Guardar todos los cambios
¿A qué hora sale el último tren?
Las exportaciones de aceite de oliva crecieron un 9 % en el primer semestre.
¡Qué sorpresa verte aquí!
La Comisión debe actuar con mayor rapidez ante esta crisis.
El archivo seleccionado no es compatible.
Una habitación doble para dos noches, por favor.
La tenista Lucía Romero ganó su primer torneo profesional en Acapulco.
Te he dicho mil veces que no toques mis cosas.
Apoyo plenamente las enmiendas presentadas por mi grupo.
Cerrar sesión en este dispositivo
¿Está lejos la playa?
Un terremoto de magnitud 6,1 sacudió el sur de Chile sin causar víctimas.
Vámonos antes de que empiece a llover.
La política de cohesión es esencial para las regiones más pobres.
Introduzca su número de cliente.
¿Se puede pagar en efectivo?
El festival de cine de Málaga recibió más de 40.000 espectadores.
Lo siento, pero no puedo quedarme.
Pido a la Comisión que presente una propuesta legislativa antes de junio.
La contraseña es incorrecta.
Quisiera alquilar una bicicleta para todo el día.
Los médicos del hospital de Sevilla realizaron con éxito un trasplante doble de pulmón.
¿De verdad crees que va a funcionar?
No podemos seguir ignorando el problema del desempleo juvenil.
Actualización instalada correctamente.
¿Hay algún cajero automático por aquí?
El precio de la electricidad bajó un 15 % en mayo.
Marta, abre la puerta, soy yo.
Esta resolución envía un mensaje claro a los ciudadanos.
Imprimir el documento actual
¿Cuánto cuesta la entrada para niños?
La selección ganó 3-0 y se clasificó para el Mundial.
No tengas miedo, estoy contigo.
La votación tendrá lugar el jueves a las doce.
Sin conexión a internet
¿Me podría indicar cómo llegar al puerto?
Más de 2.000 voluntarios participaron en la limpieza de las playas.
¿Por qué no me lo dijiste antes?
Gracias por su paciencia.
