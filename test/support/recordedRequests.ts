import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import type { FormatId } from "../../src/domain/canonical.js"

/** The inbound wire format of a recorded request's path, if it is an inference call. */
const formatOf = (p: string): FormatId | undefined =>
  p.endsWith("/chat/completions")
    ? "openai-chat"
    : p.endsWith("/responses")
      ? "openai-responses"
      : /\/messages(\/count_tokens)?$/.test(p)
        ? "anthropic"
        : /:(stream)?generateContent$|:countTokens$/i.test(p)
          ? "gemini"
          : /\/api\/(chat|generate)$/.test(p)
            ? "ollama"
            : undefined

/**
 * The recorded client requests of test/fixtures/clients (cli/ and sdk/, `.jsonl` lines and `.json`
 * recordings' `requests`): every inference body with its format and the recording it came from.
 */
export const recordedRequests = (): Array<{ file: string; format: FormatId; body: Record<string, unknown> }> => {
  const dir = path.join(path.dirname(fileURLToPath(import.meta.url)), "../fixtures/clients")
  const out: Array<{ file: string; format: FormatId; body: Record<string, unknown> }> = []
  const take = (file: string, p: unknown, body: unknown) => {
    const format = typeof p === "string" ? formatOf(p) : undefined
    if (format && typeof body === "object" && body !== null && !Array.isArray(body))
      out.push({ file, format, body: body as Record<string, unknown> })
  }
  for (const sub of ["cli", "sdk"]) {
    for (const name of fs.readdirSync(path.join(dir, sub))) {
      const file = path.join(sub, name)
      const text = fs.readFileSync(path.join(dir, file), "utf8")
      if (name.endsWith(".jsonl"))
        for (const line of text.split("\n").filter((l) => l.trim())) {
          const r = JSON.parse(line)
          take(file, r.path, r.body)
        }
      else if (name.endsWith(".json")) {
        const d = JSON.parse(text)
        for (const r of Array.isArray(d?.requests) ? d.requests : []) take(file, r.path ?? r.url, r.body)
      }
    }
  }
  return out
}
