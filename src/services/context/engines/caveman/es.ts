import { type LanguagePack, words } from "./pack.js"

export const es: LanguagePack = {
  id: "es",
  name: "Español",
  politeness: [
    { id: "gracias", phrase: "¡?(muchas )?gracias( de antemano)?( por (tu|su) ayuda)?[.!]*" },
    { id: "por-favor", phrase: "por favor,?" },
    { id: "podrias", phrase: "¿?(podrías|podría|puedes|puede|podrían)( por favor)?(?= [\\p{L}]+)", start: true },
    { id: "amablemente", phrase: "amablemente" },
    { id: "me-gustaria-que", phrase: "me gustaría que" },
    { id: "saludo", phrase: "(hola|buenas|buenos días|buenas tardes)[,!.]+", start: true },
    { id: "te-agradeceria-que", phrase: "(te|le) agradecería (mucho )?(que|si)" }
  ],
  filler: [
    { id: "con-el-fin-de", phrase: "con el fin de", replace: "para" },
    { id: "a-fin-de", phrase: "a fin de", replace: "para" },
    { id: "debido-a-que", phrase: "debido a (que|el hecho de que)", replace: "porque" },
    { id: "en-este-momento", phrase: "en este momento", replace: "ahora" },
    { id: "asegurate-de-que", phrase: "asegúrate de que", replace: "verifica que" },
    { id: "es-importante-destacar-que", phrase: "es importante (destacar|señalar|tener en cuenta) que,?" },
    ...words(
      "básicamente",
      "simplemente",
      "realmente",
      "literalmente",
      "totalmente",
      "sencillamente",
      "en realidad,?",
      "de hecho,?",
      "obviamente"
    )
  ],
  articles: ["el", "la", "los", "las", "un", "una", "unos", "unas"],
  hedges: [
    { id: "creo-que", phrase: "(creo|pienso|supongo|me parece) que" },
    { id: "en-mi-opinion", phrase: "(en mi opinión|sinceramente|la verdad es que),?" },
    { id: "parece-que", phrase: "parece que" },
    { id: "mas-o-menos", phrase: "más o menos" },
    ...words("probablemente", "quizás", "quizá", "tal vez", "posiblemente", "aparentemente")
  ],
  connectives: [
    { id: "por-ejemplo", phrase: "por ejemplo", replace: "p. ej." },
    { id: "ademas", phrase: "(además|asimismo|también),?" },
    { id: "sin-embargo", phrase: "(sin embargo|no obstante),?" },
    { id: "por-lo-tanto", phrase: "(por lo tanto|por consiguiente|en consecuencia),?", replace: "así" },
    { id: "ten-en-cuenta-que", phrase: "ten en cuenta que,?" },
    { id: "hay-que", phrase: "(debes|tienes que|hay que)" }
  ]
}
