/**
 * Running a skill's scripts in the plugins' sandbox, reading only the skill's folder, within time and memory limits,
 * with network only when enabled and to the manifest's hosts; every run is an audit row (docs/skills.md#scripts).
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as path from "node:path"
import { BadRequest, NotFound } from "../../domain/errors.js"
import { positiveInteger } from "../../platform/config/AppConfig.js"
import { FeatureFlags } from "../../platform/flags/FeatureFlags.js"
import { BatchWriter } from "../../platform/store/BatchWriter.js"
import { maskedJson } from "../governance/AuditLog.js"
import { badHostEntries } from "../plugins/sandbox/hosts.js"
import { runScript, type ScriptRun } from "../plugins/sandbox/runProcess.js"
import { SkillCatalog } from "./SkillCatalog.js"

export interface SkillRunRequest {
  readonly skill: string
  readonly script: string
  readonly arguments: ReadonlyArray<string>
  readonly stdin: string
}

export interface SkillRunResult extends ScriptRun {
  readonly skill: string
  readonly script: string
  /** Whether the run had the network (the flag, read when it started). */
  readonly network: boolean
}

export interface SkillRunnerShape {
  /** Runs one script of a skill to its end; `actor` is who the audit row names. */
  readonly run: (request: SkillRunRequest, actor: string) => Effect.Effect<SkillRunResult, BadRequest | NotFound>
  readonly limits: { readonly timeoutMs: number; readonly memoryLimitBytes: number; readonly concurrency: number }
}

/** The manifest's field naming the hosts a skill's scripts may fetch from. */
export const ALLOWED_HOSTS_FIELD = "allowed-hosts"

/** What a run keeps of each of stdout and stderr (characters). */
const OUTPUT_LIMIT = 1024 * 1024

/** The scripts the sandbox runs: JavaScript modules. */
const RUNNABLE = /\.(m?js)$/

const NETWORK_OFF =
  "the skills sandbox has no network: SKILLS_SANDBOX_NETWORK_ENABLED is off (with it on, a skill's scripts may fetch the hosts its manifest's allowed-hosts names)"

/** `allowed-hosts: "a.example:443, 127.0.0.1:8080"`: the entries, split on commas and spaces. */
const hostsOf = (manifest: Readonly<Record<string, string>>): Array<string> =>
  (manifest[ALLOWED_HOSTS_FIELD] ?? "").split(/[\s,]+/).filter((h) => h !== "")

export class SkillRunner extends Context.Tag("gateway/SkillRunner")<SkillRunner, SkillRunnerShape>() {
  /**
   * Limits from GATEWAY_SKILLS_RUN_TIMEOUT_MS (10 s), GATEWAY_SKILLS_RUN_MEMORY_MB (128, the
   * process's resident memory) and GATEWAY_SKILLS_RUN_CONCURRENCY (2 runs at once; more wait).
   */
  static readonly layer = Layer.effect(
    SkillRunner,
    Effect.gen(function* () {
      const catalog = yield* SkillCatalog
      const flags = yield* FeatureFlags
      const writer = yield* BatchWriter
      const timeoutMs = yield* positiveInteger("GATEWAY_SKILLS_RUN_TIMEOUT_MS", "milliseconds", 10_000)
      const memoryMb = yield* positiveInteger("GATEWAY_SKILLS_RUN_MEMORY_MB", "megabytes", 128)
      const concurrency = yield* positiveInteger("GATEWAY_SKILLS_RUN_CONCURRENCY", "runs", 2)
      const slots = yield* Effect.makeSemaphore(concurrency)
      const limits = { timeoutMs, memoryLimitBytes: memoryMb * 1024 * 1024, concurrency }

      const run = Effect.fn("SkillRunner.run")(function* (request: SkillRunRequest, actor: string) {
        const id = request.skill.trim()
        const found = yield* catalog.get(id)
        if (Option.isNone(found))
          return yield* new NotFound({
            message: `no agent skill '${id.slice(0, 100)}'; gateway_agent_skills_list names the skills present`
          })
        const { skill, manifest } = found.value
        const name = request.script.trim()
        if (!skill.scripts.includes(name)) {
          const has = skill.scripts.length > 0 ? `its scripts: ${skill.scripts.join(", ")}` : "it has none"
          return yield* new NotFound({ message: `skill ${id} has no script '${name.slice(0, 100)}' (${has})` })
        }
        if (!RUNNABLE.test(name))
          return yield* new BadRequest({ message: `${name}: only JavaScript modules (.js, .mjs) run in the skills sandbox` })
        const hosts = hostsOf(manifest)
        const bad = badHostEntries(hosts)
        if (bad.length > 0)
          return yield* new BadRequest({
            message: `skill ${id}'s ${ALLOWED_HOSTS_FIELD} has entries that are not host or host:port: ${bad.join(", ")}`
          })
        const network = yield* flags.enabled("SKILLS_SANDBOX_NETWORK_ENABLED")
        const result = yield* slots.withPermits(1)(
          Effect.promise(() =>
            runScript({
              dir: path.join(catalog.dir, id),
              script: `scripts/${name}`,
              args: request.arguments,
              stdin: request.stdin,
              timeoutMs,
              memoryLimitBytes: limits.memoryLimitBytes,
              networkOff: network ? null : NETWORK_OFF,
              hosts,
              outputLimit: OUTPUT_LIMIT
            })
          )
        )
        writer.append("audit_log", {
          ts: Date.now(),
          actor,
          action: "skill.run",
          target: `${id}/scripts/${name}`,
          detail: maskedJson({
            arguments: request.arguments,
            stdinChars: request.stdin.length,
            exitCode: result.exitCode,
            error: result.error,
            stopped: result.stopped,
            durationMs: result.durationMs,
            network,
            fetches: result.fetches
          })
        })
        return { skill: id, script: name, network, ...result }
      })
      return { run, limits }
    })
  )
}
