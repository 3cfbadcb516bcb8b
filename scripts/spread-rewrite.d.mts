/** The name of the helper the rewritten literals call. */
export declare const HELPER: string
/** The helper's declaration, as put at the top of each rewritten chunk. */
export declare const HELPER_SOURCE: string
/** The code with every `{ ...base, key }` literal it can express as a helper call rewritten, and how many were. */
export declare const rewriteSpreads: (code: string) => { readonly code: string; readonly count: number }
/** A bundle chunk rewritten, the helper declared after its first line (the banner) when used. */
export declare const rewriteChunk: (code: string) => { readonly code: string; readonly count: number }
