import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Ref from "effect/Ref"
import * as Schema from "effect/Schema"
import type { AcpAgentList, AcpAgentView, AddAcpAgent } from "../../domain/clitools.js"
import { BadRequest, Conflict, NotFound } from "../../domain/errors.js"
import { KeyValue } from "../../platform/store/KeyValue.js"
import { CliToolsConfig } from "./CliToolsConfig.js"
import { detect } from "./detect.js"

/**
 * Agent Client Protocol agents: programs an editor spawns and talks JSON-RPC to over stdio. A
 * built-in list (with the arguments that put each in ACP mode) plus custom ones stored in the
 * key-value store (namespace `acp_agents`). Detection (`<binary> --version`, the same as the
 * coding tools') runs on the first listing and again on `refresh`, or for an agent when added.
 */
export interface AcpAgentDef {
  readonly id: string
  readonly name: string
  readonly binary: string
  readonly args: ReadonlyArray<string>
}

export const BUILTIN_ACP_AGENTS: ReadonlyArray<AcpAgentDef> = [
  { id: "claude-code-acp", name: "Claude Code (ACP adapter)", binary: "claude-code-acp", args: [] },
  { id: "codex-acp", name: "Codex (ACP adapter)", binary: "codex-acp", args: [] },
  { id: "gemini", name: "Gemini CLI", binary: "gemini", args: ["--acp"] },
  { id: "opencode", name: "opencode", binary: "opencode", args: ["acp"] },
  { id: "qwen", name: "Qwen Code", binary: "qwen", args: ["--acp"] },
  { id: "kilo", name: "Kilo", binary: "kilo", args: ["acp"] },
  { id: "goose", name: "Goose", binary: "goose", args: ["acp"] }
]

const NAMESPACE = "acp_agents"
const Stored = Schema.parseJson(Schema.Struct({ name: Schema.String, binary: Schema.String, args: Schema.Array(Schema.String) }))

export interface AcpAgentsShape {
  readonly list: Effect.Effect<AcpAgentList>
  /** Forgets every detection and detects all agents again. */
  readonly refresh: Effect.Effect<AcpAgentList>
  readonly add: (input: AddAcpAgent) => Effect.Effect<AcpAgentList, BadRequest | Conflict>
  readonly remove: (id: string) => Effect.Effect<{ readonly removed: string }, BadRequest | NotFound>
}

type Detected = Pick<AcpAgentView, "installed" | "version">

export class AcpAgents extends Context.Tag("gateway/AcpAgents")<AcpAgents, AcpAgentsShape>() {
  static readonly layer = Layer.effect(
    AcpAgents,
    Effect.gen(function* () {
      const kv = yield* KeyValue
      const config = yield* CliToolsConfig
      /** Detection per `binary` (agents sharing one binary share it). */
      const detected = yield* Ref.make(new Map<string, Detected>())

      const custom = Effect.map(kv.entries(NAMESPACE), (rows) =>
        rows.flatMap(([id, json]): Array<AcpAgentDef> => {
          try {
            return [{ id, ...Schema.decodeUnknownSync(Stored)(json) }]
          } catch {
            return []
          }
        })
      )

      const detectBinary = (binary: string) =>
        Effect.map(detect(binary, config.detect), (d): Detected => ({ installed: d.installed, version: d.version ?? null }))

      const list = Effect.gen(function* () {
        const defs = [
          ...BUILTIN_ACP_AGENTS.map((d) => ({ ...d, isCustom: false })),
          ...(yield* custom).map((d) => ({ ...d, isCustom: true }))
        ]
        const known = yield* Ref.get(detected)
        const missing = [...new Set(defs.map((d) => d.binary).filter((b) => !known.has(b)))]
        const found = yield* Effect.forEach(missing, (b) => Effect.map(detectBinary(b), (d) => [b, d] as const), {
          concurrency: "unbounded"
        })
        const all = yield* Ref.updateAndGet(detected, (m) => new Map([...m, ...found]))
        const agents = defs.map((d): AcpAgentView => {
          const det = all.get(d.binary) ?? { installed: false, version: null }
          return {
            id: d.id,
            name: d.name,
            binary: d.binary,
            args: [...d.args],
            version: det.version,
            installed: det.installed,
            protocol: "acp",
            isCustom: d.isCustom
          }
        })
        const installed = agents.filter((a) => a.installed).length
        return {
          agents,
          summary: {
            total: agents.length,
            installed,
            notFound: agents.length - installed,
            builtIn: BUILTIN_ACP_AGENTS.length,
            custom: agents.length - BUILTIN_ACP_AGENTS.length
          }
        }
      }).pipe(Effect.withSpan("AcpAgents.list"))

      return {
        list,
        refresh: Effect.zipRight(Ref.set(detected, new Map()), list),
        add: (input) =>
          Effect.gen(function* () {
            if (BUILTIN_ACP_AGENTS.some((b) => b.id === input.id)) {
              return yield* new Conflict({ message: `'${input.id}' is a built-in ACP agent; choose another id` })
            }
            yield* kv.set(NAMESPACE, input.id, JSON.stringify({ name: input.name, binary: input.binary, args: input.args ?? [] }))
            // Detect this agent's binary anew (it may have been installed since).
            yield* Ref.update(detected, (m) => {
              const next = new Map(m)
              next.delete(input.binary)
              return next
            })
            return yield* list
          }),
        remove: (id) =>
          Effect.gen(function* () {
            if (BUILTIN_ACP_AGENTS.some((b) => b.id === id))
              return yield* new BadRequest({ message: `'${id}' is a built-in ACP agent and cannot be deleted` })
            if (!(yield* kv.remove(NAMESPACE, id))) return yield* new NotFound({ message: `no custom ACP agent '${id}'` })
            return { removed: id }
          })
      }
    })
  )
}
