/**
 * The shape of a caveman language pack: word and phrase lists per rule family. A phrase is a
 * regular-expression fragment over plain words (`\s+` between words is added by the engine), matched
 * case-insensitively and only as whole words (never inside an identifier, path or number).
 */
export interface PhraseRule {
  /** Stable id within the pack (the engine prefixes it with the pack and family). */
  readonly id: string
  /** Words of the phrase, separated by single spaces; `(a|b)` alternations and `?` are allowed. */
  readonly phrase: string
  /** What the phrase becomes; absent: it is dropped. */
  readonly replace?: string
  /** Only at the start of a sentence ("Could you …", not "… how could you …"). */
  readonly start?: boolean
}

export interface LanguagePack {
  readonly id: string
  readonly name: string
  /** level lite and up: greetings, thanks, "please", "could you kindly". */
  readonly politeness: ReadonlyArray<PhraseRule>
  /** level lite and up: words and phrases that carry no meaning ("basically", "in order to" → "to"). */
  readonly filler: ReadonlyArray<PhraseRule>
  /** level full and up: articles, dropped before a following word. */
  readonly articles: ReadonlyArray<string>
  /** The articles double as relative pronouns after a comma ("…, die die Datei liest"): not dropped there. */
  readonly relativePronouns?: boolean
  /** level full and up: hedges ("I think", "probably"). */
  readonly hedges: ReadonlyArray<PhraseRule>
  /** level ultra: connective words and short phrases. */
  readonly connectives: ReadonlyArray<PhraseRule>
}

/** A rule per word, its id being the word itself. */
export const words = (...list: ReadonlyArray<string>): ReadonlyArray<PhraseRule> =>
  list.map((phrase) => ({ id: phrase.replace(/[^\p{L}\p{N}]+/gu, "-").replace(/^-|-$/g, ""), phrase }))
