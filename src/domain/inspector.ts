/**
 * The traffic inspector's API shapes (spec document 3; docs/inspector.md): intercepted requests
 * (list and detail), sessions, custom hosts and capture modes. The buffer's own types are in
 * src/services/inspector/types.ts; these are what the HTTP API and the CLI exchange.
 */
import * as Schema from "effect/Schema"
import { strict } from "./parse.js"

export const CaptureSourceSchema = Schema.Literal("agent-bridge", "custom-host", "http-proxy", "system-proxy", "tproxy", "mcp", "realtime")
export const DetectedKindSchema = Schema.Literal("llm", "app", "unknown", "custom")

const Nullable = <S extends Schema.Schema.Any>(s: S) => Schema.NullOr(s)

export const LlmMetaSchema = Schema.Struct({
  provider: Nullable(Schema.String),
  apiKind: Nullable(Schema.String),
  model: Nullable(Schema.String),
  messages: Schema.Number.annotations({ description: "Turns of the request" }),
  tokensIn: Nullable(Schema.Number),
  tokensOut: Nullable(Schema.Number),
  streamed: Schema.Boolean,
  mappedTo: Nullable(Schema.String),
  costEstimateUsd: Nullable(Schema.Number)
})

export const TimingsSchema = Schema.Struct({
  startedAt: Schema.Number.annotations({ description: "Epoch ms" }),
  ttfbMs: Nullable(Schema.Number),
  totalMs: Nullable(Schema.Number)
})

const summaryFields = {
  id: Schema.String,
  seq: Schema.Number,
  source: CaptureSourceSchema,
  status: Schema.Union(Schema.Number, Schema.Literal("in-flight", "error")),
  detectedKind: DetectedKindSchema,
  method: Schema.String,
  url: Schema.String,
  host: Schema.String,
  port: Nullable(Schema.Number),
  path: Schema.String,
  tls: Schema.Boolean,
  httpVersion: Schema.String,
  requestSize: Schema.Number,
  responseSize: Nullable(Schema.Number),
  timings: TimingsSchema,
  error: Nullable(Schema.String),
  tunnelOnly: Schema.Boolean,
  contextKey: Nullable(Schema.String),
  pid: Nullable(Schema.Number),
  processName: Nullable(Schema.String),
  agent: Nullable(Schema.String),
  llm: Nullable(LlmMetaSchema),
  annotation: Nullable(Schema.String),
  replayOf: Nullable(Schema.String),
  replays: Schema.Array(Schema.String),
  sessionIds: Schema.Array(Schema.String),
  requestId: Nullable(Schema.String)
}

export const InterceptedSummary = Schema.Struct({ ...summaryFields, hasBodies: Schema.Boolean }).annotations({
  identifier: "InterceptedSummary"
})

const Headers = Schema.Record({ key: Schema.String, value: Schema.String })
export const CapturedBodySchema = Schema.Struct({
  text: Schema.String,
  encoding: Schema.Literal("utf8", "base64"),
  size: Schema.Number,
  truncated: Schema.Boolean,
  decodedFrom: Schema.optional(Schema.String),
  notice: Schema.optional(Schema.String)
})

export const InterceptedRequestView = Schema.Struct({
  ...summaryFields,
  requestHeaders: Headers,
  responseHeaders: Nullable(Headers),
  requestBody: Nullable(CapturedBodySchema),
  responseBody: Nullable(CapturedBodySchema),
  conversation: Nullable(
    Schema.Struct({
      request: Schema.Array(Schema.Unknown),
      response: Schema.Array(Schema.Unknown),
      contextKey: Nullable(Schema.String),
      rawEvents: Schema.optional(Schema.Array(Schema.Unknown))
    })
  ).annotations({ description: "The normalized conversation: turns of the request and of the answer (merged from a stream)" }),
  upstream: Schema.Array(Schema.Unknown).annotations({
    description: "agent-bridge: each upstream attempt, what was sent after translation and what came back"
  })
}).annotations({ identifier: "InterceptedRequest" })

export const RequestsQuery = Schema.Struct({
  profile: Schema.optional(Schema.Literal("llm", "all")),
  host: Schema.optional(Schema.String),
  agent: Schema.optional(Schema.String),
  status: Schema.optional(Schema.String.annotations({ description: "in-flight, error, ok, failed, 2xx..5xx or a status" })),
  source: Schema.optional(CaptureSourceSchema),
  sessionId: Schema.optional(Schema.String),
  limit: Schema.optional(Schema.NumberFromString.pipe(Schema.int(), Schema.between(1, 100_000)))
})

export const DetailQuery = Schema.Struct({
  showSecrets: Schema.optional(Schema.Literal("true", "false"))
})

export const RequestList = Schema.Struct({
  requests: Schema.Array(InterceptedSummary),
  total: Schema.Number,
  bufferSize: Schema.Number
})

export const AnnotationPayload = Schema.Struct({ note: Schema.NullOr(Schema.String.pipe(Schema.maxLength(10_000))) }).annotations(strict)

export const ReplayResult = Schema.Struct({
  original: Schema.String,
  replay: Schema.NullOr(Schema.String).annotations({ description: "The replay's own entry (linked to the original by replayOf)" }),
  requestId: Schema.String,
  status: Schema.Number
})

export const SessionViewSchema = Schema.Struct({
  id: Schema.String,
  name: Schema.NullOr(Schema.String),
  state: Schema.Literal("recording", "saved"),
  startedAt: Schema.Number,
  stoppedAt: Schema.NullOr(Schema.Number),
  count: Schema.Number,
  dropped: Schema.Number
}).annotations({ identifier: "InspectorSession" })

export const StartSession = Schema.Struct({ name: Schema.optional(Schema.NullOr(Schema.String.pipe(Schema.maxLength(200)))) }).annotations(
  strict
)
export const UpdateSession = Schema.Struct({
  action: Schema.Literal("stop", "rename"),
  name: Schema.optional(Schema.NullOr(Schema.String.pipe(Schema.maxLength(200))))
}).annotations(strict)
export const SessionList = Schema.Struct({ sessions: Schema.Array(SessionViewSchema) })
export const SessionSnapshot = Schema.Struct({ session: SessionViewSchema, requests: Schema.Array(InterceptedRequestView) })
export const SessionExportQuery = Schema.Struct({ format: Schema.optional(Schema.Literal("har", "jsonl")) })

export const HostKind = Schema.Literal("llm", "app", "custom")
export const CustomHostSchema = Schema.Struct({
  host: Schema.String,
  kind: HostKind,
  enabled: Schema.Boolean,
  addedAt: Schema.Number
}).annotations({ identifier: "InspectorCustomHost" })
export const AddHost = Schema.Struct({
  host: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(253)),
  kind: Schema.optional(HostKind),
  enabled: Schema.optional(Schema.Boolean)
}).annotations(strict)
export const PatchHost = Schema.Struct({ enabled: Schema.Boolean }).annotations(strict)
export const HostPath = Schema.Struct({ host: Schema.String })
export const HostList = Schema.Struct({ hosts: Schema.Array(CustomHostSchema), hostsFile: Schema.String, mitm: Schema.Unknown })

export const HttpProxyAction = Schema.Struct({ action: Schema.Literal("start", "stop") }).annotations(strict)
export const SystemProxyAction = Schema.Struct({ action: Schema.Literal("apply", "revert") }).annotations(strict)
export const TlsInterceptPayload = Schema.Struct({ enabled: Schema.Boolean }).annotations(strict)

export const CaptureModes = Schema.Struct({
  agentBridge: Schema.Struct({ enabled: Schema.Boolean, capturingBodies: Schema.Boolean, subscribers: Schema.Number }),
  customHosts: Schema.Unknown,
  httpProxy: Schema.Unknown,
  systemProxy: Schema.Unknown,
  tlsIntercept: Schema.Struct({ enabled: Schema.Boolean }),
  ca: Schema.Struct({
    fingerprint256: Schema.NullOr(Schema.String),
    pemUrl: Schema.String,
    path: Schema.NullOr(Schema.String),
    trust: Schema.Array(Schema.String).annotations({ description: "How to trust the CA" })
  }),
  buffer: Schema.Struct({
    entries: Schema.Number,
    bufferSize: Schema.Number,
    bodyBytes: Schema.Number,
    maxBodyBytes: Schema.Number,
    maskSecrets: Schema.Boolean
  })
}).annotations({ identifier: "InspectorCaptureModes" })

export const IngestPayload = Schema.Struct({
  source: Schema.optional(CaptureSourceSchema),
  method: Schema.String,
  url: Schema.String,
  requestHeaders: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })),
  requestBody: Schema.optional(Schema.String),
  status: Schema.optional(Schema.Union(Schema.Number, Schema.Literal("error"))),
  responseHeaders: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })),
  responseBody: Schema.optional(Schema.String),
  error: Schema.optional(Schema.String),
  durationMs: Schema.optional(Schema.Number)
}).annotations(strict)

// ---------------------------------------------------------------- transparent capture (TPROXY)

const port = (what: string) =>
  Schema.Int.pipe(Schema.between(1, 65535)).annotations({ description: what, message: () => "must be an integer from 1 to 65535" })
const positive32 = (what: string) =>
  Schema.Int.pipe(Schema.between(1, 0xffffffff)).annotations({
    description: what,
    message: () => "must be an integer from 1 to 4294967295 (32 bits)"
  })

/**
 * The start body of `POST /api/tools/agent-bridge/tproxy` (spec document 3, "Transparent capture
 * configuration"); every field optional, defaults filled in by the service. The bypass mark must
 * differ from the mark, and the route table may not be one of the kernel's own (253-255): the
 * service checks those before any command runs.
 */
export const TproxyStartFields = Schema.Struct({
  dport: Schema.optional(port("Destination TCP port intercepted (default 443).")),
  mark: Schema.optional(positive32("Firewall mark of intercepted packets (default 0x2333 = 9011).")),
  onPort: Schema.optional(port("Port of the transparent listener (default 8443).")),
  routeTable: Schema.optional(positive32("Policy-routing table id (default 233).")),
  bypassMark: Schema.optional(
    positive32("Socket mark of the gateway's own upstream connections, never intercepted (default 0x539 = 1337).")
  ),
  sudoPassword: Schema.optional(
    Schema.String.pipe(Schema.maxLength(1024)).annotations({
      description:
        "Only for a gateway not running as root: authorizes the trust-store install through sudo; never stored or logged. Ignored as root."
    })
  )
}).annotations(strict)
/** No body (or `null`) is every default: read as `{}`. */
export const TproxyStart = Schema.transform(Schema.NullOr(TproxyStartFields), Schema.typeSchema(TproxyStartFields), {
  strict: true,
  decode: (body) => body ?? {},
  encode: (body) => body
})

export const TproxyConfigView = Schema.Struct({
  dport: Schema.Number,
  mark: Schema.Number,
  onPort: Schema.Number,
  routeTable: Schema.Number,
  bypassMark: Schema.Number
})

/** `GET /api/tools/agent-bridge/tproxy`: whether the mode can run here (and why not), and what it does while it runs. */
export const TproxyStatus = Schema.Struct({
  running: Schema.Boolean,
  available: Schema.Boolean,
  /** Why it is not available (not Linux, the addon not built, no CAP_NET_ADMIN); null when it is. */
  reason: Schema.NullOr(Schema.String),
  /** Connections diverted to the listener since the start. */
  interceptCount: Schema.Number,
  /** The listener's port: the running one, else the default onPort. */
  port: Schema.Number,
  startedAt: Schema.NullOr(Schema.Number),
  config: Schema.NullOr(TproxyConfigView),
  /** The CA's slot in the OS trust store while running (null when the store is unknown: trust the CA by hand). */
  trustStore: Schema.Struct({ installed: Schema.Boolean, path: Schema.NullOr(Schema.String), note: Schema.NullOr(Schema.String) }),
  /** The exact commands applied (while running) and the ones that undo them by hand. */
  commands: Schema.Struct({ applied: Schema.Array(Schema.String), revert: Schema.Array(Schema.String) }),
  /** The last start's or stop's failure, or the cleanup after a crash. */
  lastError: Schema.NullOr(Schema.String)
})
