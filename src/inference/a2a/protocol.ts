import { VERSION } from "../../kernel/version.js"
import type { SkillEntry } from "../../services/skills/SkillCatalog.js"

/**
 * The gateway as an A2A agent (docs/skills.md, "A2A"): JSON-RPC 2.0 on `POST /a2a` with one
 * skill, `list-capabilities`, and the agent card that describes it. Plain functions over plain
 * data; the routes (src/inference/routes/a2a.ts) read the body and the catalog.
 */

export const A2A_PATH = "/a2a"
export const AGENT_CARD_PATH = "/.well-known/agent-card.json"
/**
 * The A2A protocol revisions served: 0.3 (the card's `protocolVersion`, `url`,
 * `preferredTransport`; `message/send`; results tagged with `kind`) and 1.0 (the card's
 * `supportedInterfaces`; `SendMessage`; results wrapped as `{task}`, states `TASK_STATE_*`, parts
 * without `kind`). A request says which with its `A2A-Version` header; none means 0.3.
 */
export const A2A_PROTOCOL_VERSION = "0.3.0"
export const A2A_VERSIONS = ["0.3", "1.0"] as const
export type A2aVersion = (typeof A2A_VERSIONS)[number]
/** `SendMessage` is the 1.0 name of `message/send`; either is taken in either version. */
export const A2A_METHODS = ["message/send", "SendMessage"] as const

/**
 * The version a request asks for in its `A2A-Version` header (absent: 0.3, the version that had
 * no header); `0.3.0` and `1.0.0` are the same versions. Undefined for any other value.
 */
export const requestedVersion = (header: string | undefined): A2aVersion | undefined => {
  if (header === undefined || header.trim() === "") return "0.3"
  const m = /^(\d+)\.(\d+)(?:\.\d+)?$/.exec(header.trim())
  const version = m ? `${Number(m[1])}.${Number(m[2])}` : undefined
  return (A2A_VERSIONS as ReadonlyArray<string>).includes(version ?? "") ? (version as A2aVersion) : undefined
}

export const LIST_CAPABILITIES = "list-capabilities"

const AGENT_SKILLS = [
  {
    id: LIST_CAPABILITIES,
    name: "List capabilities",
    description: "A markdown table of the gateway's 42 agent skills (REST API and command line) with the URL of each skill file.",
    tags: ["catalog", "skills", "discovery"],
    examples: ["What can this gateway do?"],
    inputModes: ["text/plain"],
    outputModes: ["text/markdown"]
  }
] as const

/** JSON-RPC 2.0 error codes used here. */
export const RpcCode = {
  parseError: -32700,
  invalidRequest: -32600,
  methodNotFound: -32601,
  invalidParams: -32602,
  /** A2A 1.0: the `A2A-Version` asked for is not served. */
  versionNotSupported: -32009
} as const

export interface RpcError {
  readonly code: number
  readonly message: string
  readonly data?: unknown
}

type RpcId = string | number | null

export const rpcError = (id: RpcId, error: RpcError) => ({ jsonrpc: "2.0" as const, id, error })
export const rpcResult = (id: RpcId, result: unknown) => ({ jsonrpc: "2.0" as const, id, result })

/**
 * The agent card (`/.well-known/agent-card.json`), its URLs on `origin`: one card for both
 * versions, the 1.0 fields (`supportedInterfaces`, `httpAuthSecurityScheme`,
 * `securityRequirements`) beside the 0.3 ones, as A2A 1.0 servers serve 0.3 clients. A 0.3
 * client reads `url` and `preferredTransport`; a 1.0 client picks the `supportedInterfaces`
 * entry of its version.
 */
export const agentCard = (origin: string, keyRequired: boolean) => ({
  protocolVersion: A2A_PROTOCOL_VERSION,
  name: "gateway",
  description:
    "Self-hosted AI gateway: one base URL and one key in front of many AI providers. Ask it for its capabilities: the agent skills that explain its REST API and command line.",
  url: `${origin}${A2A_PATH}`,
  preferredTransport: "JSONRPC",
  additionalInterfaces: [{ url: `${origin}${A2A_PATH}`, transport: "JSONRPC" }],
  supportedInterfaces: [
    { url: `${origin}${A2A_PATH}`, protocolBinding: "JSONRPC", protocolVersion: "1.0" },
    { url: `${origin}${A2A_PATH}`, protocolBinding: "JSONRPC", protocolVersion: "0.3" }
  ],
  version: VERSION,
  documentationUrl: `${origin}/api/agent-skills`,
  capabilities: { streaming: false, pushNotifications: false, stateTransitionHistory: false, extendedAgentCard: false },
  defaultInputModes: ["text/plain"],
  defaultOutputModes: ["text/markdown"],
  skills: AGENT_SKILLS,
  securitySchemes: {
    gatewayKey: {
      type: "http",
      scheme: "bearer",
      description: "A gateway API key (the same as for inference).",
      httpAuthSecurityScheme: { scheme: "bearer", description: "A gateway API key (the same as for inference)." }
    }
  },
  /** Present when this gateway requires a key right now (REQUIRE_API_KEY, or a non-loopback bind). */
  ...(keyRequired ? { security: [{ gatewayKey: [] }], securityRequirements: [{ schemes: { gatewayKey: { list: [] } } }] } : {})
})

const cell = (text: string) => text.replace(/\\/g, "\\\\").replace(/\|/g, "\\|").replace(/\r?\n/g, " ")

/** The skills as one markdown table: id, name, category, description, raw URL. */
export const skillsTable = (skills: ReadonlyArray<SkillEntry>): string =>
  [
    "| id | name | category | description | raw URL |",
    "|---|---|---|---|---|",
    ...skills.map((s) => `| ${cell(s.id)} | ${cell(s.name)} | ${s.category} | ${cell(s.description)} | ${cell(s.rawUrl)} |`)
  ].join("\n")

/** What a valid `message/send` asks for. */
export interface SendRequest {
  readonly id: RpcId
  readonly skill: string
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v)

/**
 * A parsed JSON-RPC body checked as a `message/send` request: the request or the error to
 * answer. `params.skill` defaults to `list-capabilities` (a plain A2A client sends only
 * `message`); `params.messages` is an array of `{role, content}`; `params.message` (the A2A
 * message object) is accepted too.
 */
export const readSend = (body: unknown): SendRequest | { readonly id: RpcId; readonly error: RpcError } => {
  if (!isObject(body))
    return {
      id: null,
      error: { code: RpcCode.invalidRequest, message: "the request must be a JSON-RPC 2.0 object (batches are not supported)" }
    }
  const rawId = body["id"]
  const id: RpcId = typeof rawId === "string" || typeof rawId === "number" ? rawId : null
  if (body["jsonrpc"] !== "2.0") return { id, error: { code: RpcCode.invalidRequest, message: 'jsonrpc must be "2.0"' } }
  if (rawId !== undefined && rawId !== null && id === null)
    return { id: null, error: { code: RpcCode.invalidRequest, message: "id must be a string, a number or null" } }
  const method = body["method"]
  if (typeof method !== "string") return { id, error: { code: RpcCode.invalidRequest, message: "method must be a string" } }
  if (!(A2A_METHODS as ReadonlyArray<string>).includes(method)) {
    return {
      id,
      error: {
        code: RpcCode.methodNotFound,
        message: `method ${JSON.stringify(method.slice(0, 100))} is not supported; use one of: ${A2A_METHODS.join(", ")}`
      }
    }
  }
  const params = body["params"]
  if (!isObject(params)) return { id, error: { code: RpcCode.invalidParams, message: "params must be an object with skill and messages" } }
  const skill = params["skill"] ?? LIST_CAPABILITIES
  if (typeof skill !== "string") return { id, error: { code: RpcCode.invalidParams, message: "params.skill must be a string" } }
  const messages = params["messages"]
  if (messages !== undefined) {
    if (!Array.isArray(messages))
      return { id, error: { code: RpcCode.invalidParams, message: "params.messages must be an array of {role, content}" } }
    const bad = messages.findIndex((m) => !isObject(m) || typeof m["role"] !== "string" || m["content"] === undefined)
    if (bad >= 0)
      return {
        id,
        error: { code: RpcCode.invalidParams, message: `params.messages[${bad}] must be an object with a string role and a content` }
      }
  }
  if (params["message"] !== undefined && !isObject(params["message"])) {
    return { id, error: { code: RpcCode.invalidParams, message: "params.message must be an object" } }
  }
  if (skill !== LIST_CAPABILITIES) {
    return {
      id,
      error: {
        code: RpcCode.invalidParams,
        message: `unknown skill ${JSON.stringify(skill.slice(0, 100))}; this agent has: ${LIST_CAPABILITIES}`,
        data: { skills: [LIST_CAPABILITIES] }
      }
    }
  }
  return { id, skill }
}

/**
 * The answer to `list-capabilities`: a completed task whose first artifact is the table, in the
 * shape of the request's version. 0.3: the task itself (`kind: "task"`, state `completed`, parts
 * `{kind: "text", text}`, and the table again as the artifact's `content`, as the gateway's A2A
 * discovery has answered since before 1.0). 1.0: `{task}` (state `TASK_STATE_COMPLETED`, parts
 * `{text, mediaType}`), nothing outside the 1.0 schema.
 */
export const capabilitiesResult = (version: A2aVersion, table: string, count: number, taskId: string, at: Date) =>
  version === "1.0"
    ? {
        task: {
          id: taskId,
          contextId: taskId,
          status: { state: "TASK_STATE_COMPLETED", timestamp: at.toISOString() },
          artifacts: [
            {
              artifactId: `${taskId}-capabilities`,
              name: "capabilities",
              description: `The gateway's ${count} agent skills`,
              parts: [{ text: table, mediaType: "text/markdown" }]
            }
          ]
        }
      }
    : capabilitiesTask(table, count, taskId, at)

/** The 0.3 answer to `list-capabilities` (see `capabilitiesResult`). */
export const capabilitiesTask = (table: string, count: number, taskId: string, at: Date) => ({
  kind: "task",
  id: taskId,
  contextId: taskId,
  status: { state: "completed", timestamp: at.toISOString() },
  artifacts: [
    {
      artifactId: `${taskId}-capabilities`,
      name: "capabilities",
      description: `The gateway's ${count} agent skills`,
      content: table,
      parts: [{ kind: "text", text: table }]
    }
  ]
})
