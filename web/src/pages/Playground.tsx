import { useEffect, useRef, useState } from "preact/hooks"
import { api, errorMessage, ok } from "../api/client"
import {
  Badge,
  Button,
  Checkbox,
  Dialog,
  fmtMoney,
  fmtMs,
  fmtNumber,
  NumberInput,
  Page,
  Section,
  Select,
  TextArea,
  TextInput,
  toast,
  useAction,
  useLoad
} from "../ui"
import { curlSnippet, pythonSnippet, type SnippetRequest, typescriptSnippet } from "./playground/snippets"
import {
  authHeaders,
  type ChatRun,
  emptyRun,
  errorOf,
  estimateCost,
  type Params,
  type Price,
  streamChat,
  tokensPerSecond
} from "./playground/stream"
import "./Playground.css"

// The playground (docs/playground.md): one workspace for the gateway's 10 endpoints, streaming
// chat with its metrics, a compare view of up to 4 models, presets (/api/playground/presets),
// prompt improvement (/api/playground/improve-prompt) and code to copy.

const ENDPOINTS = [
  "chat-completions",
  "completions",
  "embeddings",
  "images",
  "audio",
  "speech",
  "transcriptions",
  "moderations",
  "rerank",
  "search"
] as const
type Endpoint = (typeof ENDPOINTS)[number]

const PATHS: Record<Endpoint, string> = {
  "chat-completions": "/v1/chat/completions",
  completions: "/v1/completions",
  embeddings: "/v1/embeddings",
  images: "/v1/images/generations",
  audio: "/v1/audio/translations",
  speech: "/v1/audio/speech",
  transcriptions: "/v1/audio/transcriptions",
  moderations: "/v1/moderations",
  rerank: "/v1/rerank",
  search: "/v1/search"
}
const LABELS: Record<Endpoint, string> = {
  "chat-completions": "Chat completions",
  completions: "Completions",
  embeddings: "Embeddings",
  images: "Images",
  audio: "Audio (translate to English)",
  speech: "Speech",
  transcriptions: "Transcriptions",
  moderations: "Moderations",
  rerank: "Rerank",
  search: "Search"
}
const FILE_ENDPOINTS: ReadonlySet<Endpoint> = new Set(["audio", "transcriptions"])
const KEY_STORE = "gateway.playground.key"

type Form = { endpoint: Endpoint; model: string; system: string; prompt: string; documents: string; params: Params }
const blank: Form = { endpoint: "chat-completions", model: "", system: "", prompt: "", documents: "", params: {} }

const cleanParams = (p: Params): Params =>
  Object.fromEntries(Object.entries(p).filter(([, v]) => v !== undefined && v !== "" && !(Array.isArray(v) && v.length === 0))) as Params

/** The request body of the endpoint (multipart endpoints: the fields besides the file). */
const bodyOf = (f: Form, model = f.model): Record<string, unknown> => {
  const params = cleanParams(f.params)
  switch (f.endpoint) {
    case "chat-completions":
      return {
        model,
        messages: [...(f.system.trim() ? [{ role: "system", content: f.system }] : []), { role: "user", content: f.prompt }],
        ...params
      }
    case "completions":
      return { model, prompt: f.system.trim() ? `${f.system}\n\n${f.prompt}` : f.prompt, ...params }
    case "embeddings":
      return { model, input: f.prompt }
    case "images":
      return { model, prompt: f.prompt, n: 1 }
    case "speech":
      return { model, input: f.prompt, voice: "alloy" }
    case "audio":
    case "transcriptions":
      return { model }
    case "moderations":
      return { ...(model ? { model } : {}), input: f.prompt }
    case "rerank":
      return {
        model,
        query: f.prompt,
        documents: f.documents
          .split("\n")
          .map((d) => d.trim())
          .filter(Boolean)
      }
    case "search":
      return { ...(model ? { model } : {}), query: f.prompt }
  }
}

// ---------------------------------------------------------------- results

const Metrics = (p: { run: ChatRun; prices: ReadonlyArray<Price> }) => {
  const r = p.run
  const tps = tokensPerSecond(r)
  const cost = estimateCost(r, p.prices)
  return (
    <dl class="pg-metrics" aria-label={`Metrics of ${r.model}`}>
      <div>
        <dt>Time to first token</dt>
        <dd data-metric="ttft">{r.ttftMs === null ? "—" : fmtMs(r.ttftMs)}</dd>
      </div>
      <div>
        <dt>Tokens/s</dt>
        <dd data-metric="tps">{tps === null ? "—" : tps.toFixed(1)}</dd>
      </div>
      <div>
        <dt>Tokens {r.reported ? "(in / out)" : "(out, estimated)"}</dt>
        <dd data-metric="tokens">
          {r.reported ? `${fmtNumber(r.promptTokens)} / ${fmtNumber(r.completionTokens)}` : fmtNumber(r.completionTokens)}
        </dd>
      </div>
      <div>
        <dt>Cost (estimate)</dt>
        <dd data-metric="cost">{cost === null ? "—" : `≈ ${fmtMoney(cost)}`}</dd>
      </div>
    </dl>
  )
}

const ChatColumn = (p: { run: ChatRun; prompt: string; prices: ReadonlyArray<Price> }) => (
  <div class="pg-column" data-model={p.run.model} aria-busy={p.run.done ? "false" : "true"}>
    <h3>
      {p.run.model} {p.run.servedModel && p.run.servedModel !== p.run.model && <span class="muted small">→ {p.run.servedModel}</span>}{" "}
      {p.run.done ? p.run.error ? <Badge kind="bad">failed</Badge> : <Badge kind="ok">done</Badge> : <Badge kind="info">streaming</Badge>}
    </h3>
    <div class="bubble bubble-user">{p.prompt}</div>
    {p.run.reasoning && (
      <details class="bubble bubble-reasoning">
        <summary>Reasoning</summary>
        <p>{p.run.reasoning}</p>
      </details>
    )}
    {(p.run.text || p.run.toolCalls.length > 0) && (
      <div class="bubble bubble-assistant" data-answer>
        {p.run.text}
        {p.run.toolCalls.map((t, i) => (
          <div class="tool-call" key={i}>
            <code>
              {t.name}({t.arguments})
            </code>
          </div>
        ))}
      </div>
    )}
    {p.run.error && (
      <p class="error-text" role="alert" data-error>
        {p.run.error}
      </p>
    )}
    <Metrics run={p.run} prices={p.prices} />
  </div>
)

type Other =
  | { kind: "json"; endpoint: Endpoint; body: any }
  | { kind: "audio"; url: string; captions: string }
  | { kind: "error"; message: string }

/** The spoken text as a caption track for the generated speech. */
const captionsOf = (text: string) =>
  URL.createObjectURL(new Blob([`WEBVTT\n\n00:00.000 --> 99:59:59.000\n${text.replace(/-->/g, "→")}\n`], { type: "text/vtt" }))

const OtherResult = (p: { result: Other }) => {
  const r = p.result
  if (r.kind === "error")
    return (
      <p class="error-text" role="alert" data-error>
        {r.message}
      </p>
    )
  if (r.kind === "audio")
    return (
      <audio controls src={r.url} aria-label="Generated speech">
        <track kind="captions" src={r.captions} srcLang="en" label="The text spoken" default />
      </audio>
    )
  const b = r.body
  switch (r.endpoint) {
    case "completions":
      return (
        <div class="bubble bubble-assistant" data-answer>
          {b.choices?.[0]?.text ?? ""}
        </div>
      )
    case "embeddings": {
      const vectors: number[][] = (b.data ?? []).map((d: any) => d.embedding ?? [])
      return (
        <p data-answer>
          {vectors.length} vector{vectors.length === 1 ? "" : "s"} of {vectors[0]?.length ?? 0} dimensions; first values{" "}
          <code>
            {(vectors[0] ?? [])
              .slice(0, 6)
              .map((x) => x.toFixed(4))
              .join(", ")}
          </code>
        </p>
      )
    }
    case "images":
      return (
        <div class="pg-images" data-answer>
          {(b.data ?? []).map((d: any, i: number) => (
            <img key={i} alt={d.revised_prompt ?? `Generated image ${i + 1}`} src={d.url ?? `data:image/png;base64,${d.b64_json}`} />
          ))}
        </div>
      )
    case "rerank":
      return (
        <ol class="pg-ranked" data-answer>
          {[...(b.results ?? [])]
            .sort((x: any, y: any) => (y.relevance_score ?? 0) - (x.relevance_score ?? 0))
            .map((x: any) => (
              <li key={x.index}>
                <strong>{(x.relevance_score ?? 0).toFixed(3)}</strong> {x.document?.text ?? `document ${x.index}`}
              </li>
            ))}
        </ol>
      )
    case "moderations": {
      const res = b.results?.[0]
      const flagged = Object.entries(res?.categories ?? {})
        .filter(([, v]) => v === true)
        .map(([k]) => k)
      return <p data-answer>{res?.flagged ? `Flagged: ${flagged.join(", ") || "yes"}` : "Not flagged"}</p>
    }
    case "audio":
    case "transcriptions":
      return (
        <div class="bubble bubble-assistant" data-answer>
          {b.text ?? ""}
        </div>
      )
    default:
      return (
        <pre class="mono" data-answer tabIndex={0}>
          {JSON.stringify(b, null, 2)}
        </pre>
      )
  }
}

// ---------------------------------------------------------------- line diff of an improvement

const lineDiff = (before: string, after: string): Array<{ kind: "same" | "del" | "add"; text: string }> => {
  const a = before.split("\n")
  const b = after.split("\n")
  const n = a.length
  const m = b.length
  const lcs: number[][] = Array.from({ length: n + 1 }, () => new Array<number>(m + 1).fill(0))
  for (let i = n - 1; i >= 0; i--)
    for (let j = m - 1; j >= 0; j--) lcs[i]![j] = a[i] === b[j] ? lcs[i + 1]![j + 1]! + 1 : Math.max(lcs[i + 1]![j]!, lcs[i]![j + 1]!)
  const out: Array<{ kind: "same" | "del" | "add"; text: string }> = []
  let i = 0
  let j = 0
  while (i < n || j < m) {
    if (i < n && j < m && a[i] === b[j]) {
      out.push({ kind: "same", text: a[i]! })
      i++
      j++
    } else if (j < m && (i === n || lcs[i]![j + 1]! >= lcs[i + 1]![j]!)) out.push({ kind: "add", text: b[j++]! })
    else out.push({ kind: "del", text: a[i++]! })
  }
  return out
}

const Diff = (p: { label: string; before: string; after: string }) => (
  <div class="pg-diff" aria-label={`Changes to the ${p.label}`}>
    <h3>{p.label}</h3>
    <pre class="mono" tabIndex={0}>
      {lineDiff(p.before, p.after).map((l, i) => (
        <div key={i} class={`diff-${l.kind}`}>
          {l.kind === "add" ? "+ " : l.kind === "del" ? "- " : "  "}
          {l.text}
        </div>
      ))}
    </pre>
  </div>
)

// ---------------------------------------------------------------- the page

export default function PlaygroundPage() {
  const [form, setForm] = useState<Form>(blank)
  const [key, setKey] = useState(() => sessionStorage.getItem(KEY_STORE) ?? "")
  const [compare, setCompare] = useState(false)
  const [others, setOthers] = useState<string[]>(["", "", ""])
  const [runs, setRuns] = useState<ChatRun[]>([])
  const [sentPrompt, setSentPrompt] = useState("")
  const [other, setOther] = useState<Other | undefined>()
  const [file, setFile] = useState<File | undefined>()
  const [busy, setBusy] = useState(false)
  const [improved, setImproved] = useState<
    { improvedSystem?: string; improvedPrompt?: string; tokensIn: number; tokensOut: number } | undefined
  >()
  const [tone, setTone] = useState<"neutral" | "concise" | "detailed" | "formal" | "friendly" | "precise">("neutral")
  const [snippetLang, setSnippetLang] = useState<"curl" | "python" | "typescript">("curl")
  const [presetName, setPresetName] = useState("")
  const [presetId, setPresetId] = useState("")
  const abort = useRef<AbortController | undefined>(undefined)
  const [run, acting] = useAction()
  const presets = useLoad(() => ok(api.GET("/api/playground/presets")))
  const prices = useLoad(() => ok(api.GET("/api/pricing")).then((r) => r.prices as ReadonlyArray<Price>))
  const models = useLoad(() =>
    fetch("/v1/models", { headers: authHeaders(key) })
      .then((r) => (r.ok ? r.json() : { data: [] }))
      .then((b: { data?: Array<{ id: string }> }) => (b.data ?? []).map((m) => m.id))
  )
  useEffect(() => {
    if (key) sessionStorage.setItem(KEY_STORE, key)
    else sessionStorage.removeItem(KEY_STORE)
  }, [key])

  const set = <K extends keyof Form>(k: K, v: Form[K]) => setForm((f) => ({ ...f, [k]: v }))
  const setParam = <K extends keyof Params>(k: K, v: Params[K]) => setForm((f) => ({ ...f, params: { ...f.params, [k]: v } }))
  const isChat = form.endpoint === "chat-completions"

  const send = async () => {
    if (!form.model.trim() && form.endpoint !== "moderations" && form.endpoint !== "search") return toast("Choose a model first", "error")
    abort.current?.abort()
    const controller = new AbortController()
    abort.current = controller
    setBusy(true)
    setOther(undefined)
    try {
      if (isChat) {
        const chosen = [form.model, ...(compare ? others : [])]
          .map((m) => m.trim())
          .filter(Boolean)
          .slice(0, 4)
        setSentPrompt(form.prompt)
        const current: ChatRun[] = chosen.map(emptyRun)
        setRuns(current)
        // Each column streams on its own; one failing stops none of the others.
        await Promise.all(
          chosen.map((m, i) =>
            streamChat(bodyOf(form, m), key, (r) => setRuns((rs) => rs.map((x, j) => (j === i ? r : x))), controller.signal)
          )
        )
        return
      }
      setRuns([])
      const body = bodyOf(form)
      let res: Response
      if (FILE_ENDPOINTS.has(form.endpoint)) {
        if (!file) return setOther({ kind: "error", message: "Choose an audio file first" })
        const data = new FormData()
        for (const [k, v] of Object.entries(body)) data.append(k, String(v))
        data.append("file", file, file.name)
        res = await fetch(PATHS[form.endpoint], { method: "POST", headers: authHeaders(key), body: data, signal: controller.signal })
      } else {
        res = await fetch(PATHS[form.endpoint], {
          method: "POST",
          headers: { "content-type": "application/json", ...authHeaders(key) },
          body: JSON.stringify(body),
          signal: controller.signal
        })
      }
      if (!res.ok) return setOther({ kind: "error", message: await errorOf(res) })
      if (form.endpoint === "speech")
        return setOther({ kind: "audio", url: URL.createObjectURL(await res.blob()), captions: captionsOf(form.prompt) })
      setOther({ kind: "json", endpoint: form.endpoint, body: await res.json() })
    } catch (e) {
      setOther({ kind: "error", message: (e as Error).name === "AbortError" ? "stopped" : `the request failed: ${(e as Error).message}` })
    } finally {
      setBusy(false)
    }
  }

  const improve = () =>
    void run(() =>
      ok(
        api.POST("/api/playground/improve-prompt", {
          body: { prompt: form.prompt, model: form.model, tone, ...(form.system.trim() ? { system: form.system } : {}) }
        })
      )
    ).then((r) => r && setImproved(r))

  const loadPreset = (id: string) => {
    setPresetId(id)
    const p = presets.data?.presets.find((x) => x.id === id)
    if (!p) return
    let params: Params = {}
    try {
      params = JSON.parse(p.params_json) as Params
    } catch {
      // stored presets are validated; nothing to do
    }
    setForm((f) => ({ ...f, endpoint: p.endpoint, model: p.model, system: p.system, params }))
    setPresetName(p.name)
    toast(`Preset ${p.name} loaded`)
  }
  const savePreset = () =>
    void run(
      () =>
        ok(
          api.POST("/api/playground/presets", {
            body: {
              name: presetName.trim() || "Untitled",
              endpoint: form.endpoint,
              model: form.model,
              system: form.system,
              params_json: JSON.stringify(cleanParams(form.params))
            }
          })
        ),
      (p) => `Preset ${p.name} saved`
    ).then((p) => {
      if (!p) return
      presets.reload()
      setPresetId(p.id)
    })

  const snippet: SnippetRequest = {
    base: location.origin,
    path: PATHS[form.endpoint],
    body: bodyOf(form),
    ...(FILE_ENDPOINTS.has(form.endpoint) ? { fileField: "file" } : {}),
    ...(form.endpoint === "speech" ? { binary: true } : {})
  }
  const code =
    snippetLang === "curl" ? curlSnippet(snippet) : snippetLang === "python" ? pythonSnippet(snippet) : typescriptSnippet(snippet)

  return (
    <Page
      title="Playground"
      description="Try a prompt against any model the gateway routes to, compare models side by side, and copy the request as code."
    >
      <div class="pg-grid">
        <Section title="Request">
          <form
            class="form"
            aria-label="Request"
            onSubmit={(e) => {
              e.preventDefault()
              void send()
            }}
          >
            <Select
              label="Endpoint"
              name="endpoint"
              value={form.endpoint}
              options={ENDPOINTS.map((e) => ({ value: e, label: LABELS[e] }))}
              onChange={(v) => set("endpoint", v)}
            />
            <div class="field">
              <label for="pg-model">Model</label>
              <input
                id="pg-model"
                name="model"
                list="pg-models"
                value={form.model}
                onInput={(e) => set("model", (e.currentTarget as HTMLInputElement).value)}
                placeholder="provider/model, an alias or a combo"
              />
              <datalist id="pg-models">
                {(models.data ?? []).map((m) => (
                  <option key={m} value={m} />
                ))}
              </datalist>
            </div>
            {(isChat || form.endpoint === "completions") && (
              <TextArea label="System prompt" name="system" value={form.system} onInput={(v) => set("system", v)} rows={3} />
            )}
            {!FILE_ENDPOINTS.has(form.endpoint) && (
              <TextArea
                label={
                  form.endpoint === "rerank" || form.endpoint === "search"
                    ? "Query"
                    : form.endpoint === "speech"
                      ? "Text to speak"
                      : "Prompt"
                }
                name="prompt"
                value={form.prompt}
                onInput={(v) => set("prompt", v)}
                rows={5}
              />
            )}
            {form.endpoint === "rerank" && (
              <TextArea
                label="Documents (one a line)"
                name="documents"
                value={form.documents}
                onInput={(v) => set("documents", v)}
                rows={4}
              />
            )}
            {FILE_ENDPOINTS.has(form.endpoint) && (
              <div class="field">
                <label for="pg-file">Audio file</label>
                <input
                  id="pg-file"
                  type="file"
                  accept="audio/*"
                  onChange={(e) => setFile((e.currentTarget as HTMLInputElement).files?.[0])}
                />
              </div>
            )}
            {(isChat || form.endpoint === "completions") && (
              <fieldset class="pg-params">
                <legend>Parameters</legend>
                <NumberInput
                  label="temperature"
                  name="temperature"
                  min={0}
                  max={2}
                  step={0.1}
                  value={form.params.temperature}
                  onInput={(v) => setParam("temperature", v)}
                />
                <NumberInput
                  label="max_tokens"
                  name="max_tokens"
                  min={1}
                  step={1}
                  value={form.params.max_tokens}
                  onInput={(v) => setParam("max_tokens", v)}
                />
                <NumberInput
                  label="top_p"
                  name="top_p"
                  min={0}
                  max={1}
                  step={0.05}
                  value={form.params.top_p}
                  onInput={(v) => setParam("top_p", v)}
                />
                <NumberInput
                  label="presence_penalty"
                  name="presence_penalty"
                  min={-2}
                  max={2}
                  step={0.1}
                  value={form.params.presence_penalty}
                  onInput={(v) => setParam("presence_penalty", v)}
                />
                <NumberInput
                  label="frequency_penalty"
                  name="frequency_penalty"
                  min={-2}
                  max={2}
                  step={0.1}
                  value={form.params.frequency_penalty}
                  onInput={(v) => setParam("frequency_penalty", v)}
                />
                <NumberInput label="seed" name="seed" step={1} value={form.params.seed} onInput={(v) => setParam("seed", v)} />
              </fieldset>
            )}
            {isChat && (
              <Checkbox
                label="Compare with other models"
                name="compare"
                checked={compare}
                onChange={setCompare}
                hint="Up to 4 models in parallel, each streaming on its own."
              />
            )}
            {isChat &&
              compare &&
              others.map((m, i) => (
                <TextInput
                  key={i}
                  label={`Model ${i + 2}`}
                  name={`model-${i + 2}`}
                  value={m}
                  onInput={(v) => setOthers((o) => o.map((x, j) => (j === i ? v : x)))}
                />
              ))}
            <TextInput
              label="Gateway API key (only if the gateway requires one)"
              type="password"
              name="key"
              value={key}
              onInput={setKey}
              autoComplete="off"
              hint="Kept in this tab only; never put into the code below."
            />
            <div class="form-actions">
              <Button kind="primary" type="submit" busy={busy}>
                Send
              </Button>
              {busy && <Button onClick={() => abort.current?.abort()}>Stop</Button>}
            </div>
          </form>
          {(isChat || form.endpoint === "completions") && (
            <div class="pg-improve">
              <Select
                label="Tone"
                name="tone"
                value={tone}
                options={["neutral", "concise", "detailed", "formal", "friendly", "precise"] as const}
                onChange={setTone}
              />
              <Button busy={acting} disabled={!form.prompt.trim() || !form.model.trim()} onClick={improve}>
                Improve prompt
              </Button>
            </div>
          )}
        </Section>
        <Section title="Result">
          {runs.length > 0 && (
            <div class={`pg-columns pg-columns-${runs.length}`}>
              {runs.map((r) => (
                <ChatColumn key={r.model} run={r} prompt={sentPrompt} prices={prices.data ?? []} />
              ))}
            </div>
          )}
          {other && <OtherResult result={other} />}
          {runs.length === 0 && !other && <p class="muted">Send a request to see its answer here.</p>}
        </Section>
      </div>
      <Section title="Presets">
        <div class="pg-presets">
          <Select
            label="Load a preset"
            name="preset"
            value={presetId}
            options={[
              { value: "", label: "—" },
              ...(presets.data?.presets ?? []).map((p) => ({ value: p.id, label: `${p.name} (${p.endpoint})` }))
            ]}
            onChange={loadPreset}
          />
          <TextInput label="Preset name" name="preset-name" value={presetName} onInput={setPresetName} />
          <Button busy={acting} onClick={savePreset}>
            Save as preset
          </Button>
        </div>
      </Section>
      <Section title="Code">
        <div class="pg-code">
          <Select
            label="Language"
            name="language"
            value={snippetLang}
            options={[
              { value: "curl", label: "curl" },
              { value: "python", label: "Python" },
              { value: "typescript", label: "TypeScript" }
            ]}
            onChange={setSnippetLang}
          />
          <Button
            onClick={() =>
              void navigator.clipboard.writeText(code).then(
                () => toast("Copied"),
                (e) => toast(`Copy failed: ${errorMessage(e)}`, "error")
              )
            }
          >
            Copy
          </Button>
        </div>
        <pre class="mono pg-snippet" aria-label={`${snippetLang} code`} data-snippet={snippetLang} tabIndex={0}>
          {code}
        </pre>
        <p class="muted small">The key comes from the GATEWAY_API_KEY environment variable.</p>
      </Section>
      <Dialog open={improved !== undefined} title="Suggested improvement" onClose={() => setImproved(undefined)}>
        {improved && (
          <>
            {improved.improvedSystem !== undefined && <Diff label="system prompt" before={form.system} after={improved.improvedSystem} />}
            {improved.improvedPrompt !== undefined && <Diff label="prompt" before={form.prompt} after={improved.improvedPrompt} />}
            <p class="muted small">
              {improved.tokensIn} tokens in, {improved.tokensOut} out.
            </p>
            <div class="actions">
              <Button
                kind="primary"
                onClick={() => {
                  setForm((f) => ({ ...f, system: improved.improvedSystem ?? f.system, prompt: improved.improvedPrompt ?? f.prompt }))
                  setImproved(undefined)
                  toast("Improvement applied")
                }}
              >
                Apply
              </Button>
              <Button onClick={() => setImproved(undefined)}>Discard</Button>
            </div>
          </>
        )}
      </Dialog>
    </Page>
  )
}
