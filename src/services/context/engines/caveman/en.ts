import { type LanguagePack, words } from "./pack.js"

export const en: LanguagePack = {
  id: "en",
  name: "English",
  politeness: [
    { id: "thank-you", phrase: "(thank you|thanks)( (so|very) much)?( in advance)?( for (your|the) help)?[.!]*" },
    { id: "please", phrase: "please,?" },
    { id: "could-you", phrase: "(could|would|can) you( please| kindly)?( be so kind as to)?(?= [a-z]+ )", start: true },
    { id: "kindly", phrase: "kindly" },
    { id: "i-would-like-you-to", phrase: "i('d| would) (like|love) (you )?to" },
    { id: "i-would-appreciate-it-if-you", phrase: "i('d| would) (really )?appreciate (it )?if you( could)?" },
    { id: "greeting", phrase: "(hi|hello|hey)( there)?[,!.]+", start: true },
    { id: "sorry", phrase: "sorry( to bother you)?,? but" }
  ],
  filler: [
    { id: "in-order-to", phrase: "in order to", replace: "to" },
    { id: "due-to-the-fact-that", phrase: "due to the fact that", replace: "because" },
    { id: "at-this-point-in-time", phrase: "at this point in time", replace: "now" },
    { id: "for-the-purpose-of", phrase: "for the purpose of", replace: "for" },
    { id: "in-the-event-that", phrase: "in the event that", replace: "if" },
    { id: "a-lot-of", phrase: "a lot of", replace: "many" },
    { id: "make-sure", phrase: "make sure( that)?", replace: "ensure" },
    { id: "is-able-to", phrase: "(is|are) able to", replace: "can" },
    { id: "it-is-important-to-note-that", phrase: "(it is|it's) (important|worth) (to note|noting) that,?" },
    { id: "as-a-matter-of-fact", phrase: "as a matter of fact,?" },
    { id: "needless-to-say", phrase: "needless to say,?" },
    { id: "go-ahead-and", phrase: "go ahead and" },
    ...words(
      "basically",
      "actually",
      "just",
      "really",
      "very",
      "simply",
      "literally",
      "totally",
      "quite",
      "essentially",
      "definitely",
      "certainly",
      "of course,?",
      "you know,?"
    )
  ],
  articles: ["the", "a", "an"],
  hedges: [
    { id: "i-think", phrase: "i (think|believe|guess|suppose)( that)?,?" },
    { id: "it-seems", phrase: "it (seems|appears|looks) (like|that),?" },
    { id: "in-my-opinion", phrase: "(in my opinion|to be honest|honestly|frankly),?" },
    { id: "sort-of", phrase: "(sort|kind) of" },
    { id: "might-want-to", phrase: "(you )?(might|may) want to" },
    { id: "if-possible", phrase: "if possible" },
    ...words("probably", "perhaps", "maybe", "possibly", "somewhat", "presumably", "arguably")
  ],
  connectives: [
    { id: "for-example", phrase: "for (example|instance)", replace: "e.g." },
    { id: "as-well-as", phrase: "as well as", replace: "and" },
    { id: "in-addition", phrase: "(in addition|additionally|furthermore|moreover|also),?" },
    { id: "however", phrase: "(however|nevertheless|nonetheless),?" },
    { id: "therefore", phrase: "(therefore|thus|hence|consequently),?", replace: "so" },
    { id: "note-that", phrase: "note that,?" },
    { id: "you-should", phrase: "you (should|need to|must|have to)" },
    { id: "there-is", phrase: "there (is|are)" },
    { id: "which-is", phrase: "(which|that) (is|are)" }
  ]
}
