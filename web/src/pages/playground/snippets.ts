// Code that makes the playground's current request from elsewhere: curl, Python (standard
// library only) and TypeScript (fetch; valid JavaScript too, so `node file.mjs` runs it). The key
// is always read from $GATEWAY_API_KEY: the key the playground itself uses never appears here.

export interface SnippetRequest {
  /** The gateway's base URL (`http://127.0.0.1:20128`). */
  readonly base: string
  /** The inference path (`/v1/chat/completions`). */
  readonly path: string
  /** A JSON body, or a multipart form (its file field named by `fileField`). */
  readonly body: Record<string, unknown>
  readonly fileField?: string
  /** Whether the answer is binary (speech): saved to a file instead of printed. */
  readonly binary?: boolean
}

const shellQuote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`

export const curlSnippet = (r: SnippetRequest): string => {
  const url = `${r.base}${r.path}`
  const lines = [`curl -sS ${shellQuote(url)}`, `  -H "Authorization: Bearer $GATEWAY_API_KEY"`]
  if (r.fileField) {
    lines.push(`  -F ${shellQuote(`${r.fileField}=@audio.mp3`)}`)
    for (const [k, v] of Object.entries(r.body)) lines.push(`  -F ${shellQuote(`${k}=${typeof v === "string" ? v : JSON.stringify(v)}`)}`)
  } else {
    lines.push(`  -H "Content-Type: application/json"`, `  -d ${shellQuote(JSON.stringify(r.body))}`)
  }
  if (r.binary) lines.push("  -o speech.mp3")
  return lines.join(" \\\n")
}

export const pythonSnippet = (r: SnippetRequest): string => {
  const url = `${r.base}${r.path}`
  if (r.fileField) {
    return [
      "import json, os, urllib.request, uuid",
      "",
      `fields = ${JSON.stringify(Object.fromEntries(Object.entries(r.body).map(([k, v]) => [k, typeof v === "string" ? v : JSON.stringify(v)])), null, 4)}`,
      "boundary = uuid.uuid4().hex",
      "parts = []",
      "for name, value in fields.items():",
      '    parts.append(f"--{boundary}\\r\\nContent-Disposition: form-data; name=\\"{name}\\"\\r\\n\\r\\n{value}\\r\\n".encode())',
      'with open("audio.mp3", "rb") as f:',
      `    parts.append(f"--{boundary}\\r\\nContent-Disposition: form-data; name=\\"${r.fileField}\\"; filename=\\"audio.mp3\\"\\r\\nContent-Type: audio/mpeg\\r\\n\\r\\n".encode() + f.read() + b"\\r\\n")`,
      'parts.append(f"--{boundary}--\\r\\n".encode())',
      "request = urllib.request.Request(",
      `    ${JSON.stringify(url)},`,
      '    data=b"".join(parts),',
      '    headers={"Authorization": f"Bearer {os.environ[\'GATEWAY_API_KEY\']}", "Content-Type": f"multipart/form-data; boundary={boundary}"},',
      ")",
      "with urllib.request.urlopen(request) as response:",
      "    print(json.load(response))"
    ].join("\n")
  }
  return [
    "import json, os, urllib.request",
    "",
    `body = ${JSON.stringify(r.body, null, 4)
      .replace(/\btrue\b/g, "True")
      .replace(/\bfalse\b/g, "False")
      .replace(/\bnull\b/g, "None")}`,
    "request = urllib.request.Request(",
    `    ${JSON.stringify(url)},`,
    "    data=json.dumps(body).encode(),",
    '    headers={"Authorization": f"Bearer {os.environ[\'GATEWAY_API_KEY\']}", "Content-Type": "application/json"},',
    ")",
    "with urllib.request.urlopen(request) as response:",
    r.binary ? '    open("speech.mp3", "wb").write(response.read())' : "    print(json.dumps(json.load(response), indent=2))"
  ].join("\n")
}

export const typescriptSnippet = (r: SnippetRequest): string => {
  const url = `${r.base}${r.path}`
  const head = "const headers = { Authorization: `Bearer ${process.env.GATEWAY_API_KEY}` }"
  if (r.fileField) {
    return [
      'import { readFile } from "node:fs/promises"',
      "",
      head,
      "const form = new FormData()",
      ...Object.entries(r.body).map(
        ([k, v]) => `form.append(${JSON.stringify(k)}, ${JSON.stringify(typeof v === "string" ? v : JSON.stringify(v))})`
      ),
      `form.append(${JSON.stringify(r.fileField)}, new Blob([await readFile("audio.mp3")]), "audio.mp3")`,
      `const res = await fetch(${JSON.stringify(url)}, { method: "POST", headers, body: form })`,
      "console.log(await res.json())"
    ].join("\n")
  }
  return [
    ...(r.binary ? ['import { writeFile } from "node:fs/promises"', ""] : []),
    head,
    `const body = ${JSON.stringify(r.body, null, 2)}`,
    `const res = await fetch(${JSON.stringify(url)}, {`,
    '  method: "POST",',
    '  headers: { ...headers, "Content-Type": "application/json" },',
    "  body: JSON.stringify(body)",
    "})",
    "if (!res.ok) throw new Error(`${res.status}: ${await res.text()}`)",
    r.binary
      ? 'await writeFile("speech.mp3", Buffer.from(await res.arrayBuffer()))'
      : "console.log(JSON.stringify(await res.json(), null, 2))"
  ].join("\n")
}
