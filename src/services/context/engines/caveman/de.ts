import { type LanguagePack, words } from "./pack.js"

export const de: LanguagePack = {
  id: "de",
  name: "Deutsch",
  politeness: [
    { id: "danke", phrase: "(vielen )?(dank|danke)( schön| sehr)?( im voraus)?( für (deine|ihre|die) hilfe)?[.!]*" },
    { id: "bitte", phrase: "bitte,?" },
    { id: "koenntest-du", phrase: "(könntest du|kannst du|könnten sie|würdest du|würden sie)( mal)?(?= [\\p{L}]+)", start: true },
    { id: "freundlicherweise", phrase: "(freundlicherweise|netterweise)" },
    { id: "ich-haette-gern-dass", phrase: "ich (hätte gern|möchte),? dass" },
    { id: "gruss", phrase: "(hallo|hi|guten tag|moin)( zusammen)?[,!.]+", start: true }
  ],
  filler: [
    { id: "um-zu", phrase: "mit dem ziel,? zu", replace: "um zu" },
    { id: "aufgrund-der-tatsache-dass", phrase: "aufgrund der tatsache,? dass", replace: "weil" },
    { id: "zum-jetzigen-zeitpunkt", phrase: "zum (jetzigen|gegenwärtigen) zeitpunkt", replace: "jetzt" },
    { id: "es-ist-wichtig-zu-beachten-dass", phrase: "es ist wichtig zu beachten,? dass" },
    ...words(
      "eigentlich",
      "grundsätzlich",
      "einfach",
      "halt",
      "eben",
      "wirklich",
      "ziemlich",
      "quasi",
      "sozusagen",
      "tatsächlich",
      "natürlich"
    )
  ],
  articles: ["der", "die", "das", "den", "dem", "des", "ein", "eine", "einen", "einem", "einer", "eines"],
  relativePronouns: true,
  hedges: [
    { id: "ich-glaube", phrase: "ich (glaube|denke|vermute|meine),?( dass)?" },
    { id: "meiner-meinung-nach", phrase: "(meiner meinung nach|ehrlich gesagt),?" },
    { id: "es-scheint", phrase: "es scheint,?( dass| als ob)?" },
    ...words("wahrscheinlich", "vielleicht", "möglicherweise", "eventuell", "irgendwie", "gewissermaßen", "anscheinend")
  ],
  connectives: [
    { id: "zum-beispiel", phrase: "zum beispiel", replace: "z. B." },
    { id: "ausserdem", phrase: "(außerdem|zusätzlich|darüber hinaus|ebenfalls),?" },
    { id: "jedoch", phrase: "(jedoch|allerdings|trotzdem),?" },
    { id: "deshalb", phrase: "(deshalb|daher|deswegen|folglich),?", replace: "also" },
    { id: "beachte-dass", phrase: "(beachte|beachten sie),? dass" },
    { id: "du-solltest", phrase: "(du solltest|sie sollten|du musst|sie müssen)" }
  ]
}
