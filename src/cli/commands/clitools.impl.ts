import * as Prompt from "@effect/cli/Prompt"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { findTool, toolUnavailable } from "../../management/clitools/catalog.js"
import { findOnPath } from "../../management/clitools/detect.js"
import { applyChanges, planSetup, readToolState } from "../../management/clitools/plan.js"
import { processToolEnv, type Target, type ToolModule } from "../../management/clitools/tool.js"
import { GUIDES, TOOL_MODULES } from "../../management/clitools/tools/index.js"
import type { CliToolEntry } from "../../domain/clitools.js"
import { BadRequest } from "../../domain/errors.js"
import { isTruthy } from "../../platform/flags/catalog.js"
import { maskSecret } from "../../kernel/redact.js"
import { exitWith, printJson } from "../output.js"
import { localServerUrl } from "../remote.js"
import type { ConnectionOptions } from "./clitools.js"
import { fetchChatModels } from "./gatewayModels.js"

/**
 * `gateway setup-<tool>` and `gateway launch <tool>`: the tool modules of src/clitools, the
 * same code `POST /api/cli-tools/{tool}-settings` runs, on this machine's files.
 */

/** CLI_COMPAT_ALL as this process's environment has it (the CLI may target a remote gateway). */
const compatAll = () => isTruthy(process.env.CLI_COMPAT_ALL ?? "")

const toolOrFail = (id: string) =>
  Effect.gen(function* () {
    const tool = findTool(id)
    if (!tool) return yield* new BadRequest({ message: `unknown coding tool '${id}'` })
    const unavailable = toolUnavailable(tool, compatAll())
    if (unavailable) return yield* new BadRequest({ message: `${unavailable} (set CLI_COMPAT_ALL=true)` })
    return tool
  })

const keyFrom = (opts: ConnectionOptions) =>
  Effect.gen(function* () {
    const key = Option.getOrUndefined(opts.apiKey) ?? (process.env.GATEWAY_API_KEY?.trim() || undefined)
    if (key) return key
    return yield* new BadRequest({
      message:
        "a gateway key is needed: pass --api-key or set GATEWAY_API_KEY. Make one with `gateway keys add --name <tool>` (it prints the key once)"
    })
  })

const urlFrom = (opts: ConnectionOptions) =>
  Option.isSome(opts.remote)
    ? Effect.succeed(opts.remote.value.replace(/\/+$/, "").replace(/\/v1$/, ""))
    : localServerUrl(Option.getOrUndefined(opts.port))

/**
 * The target: URL, key, the live catalog's chat models and the default model (the `--model`,
 * else the tool's current model when the gateway serves it, else the first chat model).
 */
const targetFor = (opts: ConnectionOptions, current: string | null, offline: boolean, interactive: boolean) =>
  Effect.gen(function* () {
    const baseUrl = yield* urlFrom(opts)
    const apiKey = yield* keyFrom(opts)
    const wanted = Option.getOrUndefined(opts.model)
    const models = yield* fetchChatModels(baseUrl, apiKey).pipe(
      Effect.catchTag("GatewayUnreachable", (e) =>
        wanted
          ? Effect.as(Console.error(`warning: ${e.message}; writing --model ${wanted} without checking it`), [wanted])
          : Effect.fail(new BadRequest({ message: e.message }))
      )
    )
    if (wanted && !models.includes(wanted)) {
      return yield* new BadRequest({
        message: `model '${wanted}' is not in the gateway's catalog at ${baseUrl} (${models.length} chat models; see \`gateway models\`)`
      })
    }
    if (models.length === 0)
      return yield* new BadRequest({
        message: `the gateway at ${baseUrl} serves no chat model yet: connect a provider first (\`gateway provider add\`)`
      })
    const model =
      wanted ??
      (current && models.includes(current)
        ? current
        : interactive
          ? yield* Prompt.select({ message: "Default model", choices: models.map((m) => ({ title: m, value: m })) })
          : models[0]!)
    return { baseUrl, apiKey, model, models, offline } satisfies Target
  })

const maskIn = (text: string, key: string) => (key ? text.split(key).join(maskSecret(key)) : text)

const shellLine = (env: Readonly<Record<string, string>>, key: string) =>
  Object.entries(env).map(([k, v]) => `export ${k}=${v === key ? maskSecret(v) : `'${v}'`}`)

const setupGuide = (tool: CliToolEntry, opts: ConnectionOptions, json: boolean) =>
  Effect.gen(function* () {
    const target = yield* targetFor(opts, null, false, false)
    const masked = { ...target, apiKey: maskSecret(target.apiKey) }
    const lines = GUIDES[tool.id]?.(masked) ?? [`See ${tool.docsUrl}.`]
    if (json)
      return yield* printJson({
        tool: tool.id,
        configType: tool.configType,
        baseUrl: target.baseUrl,
        model: target.model,
        guide: lines,
        docsUrl: tool.docsUrl
      })
    yield* Console.log(`${tool.name} is configured in its own interface (${tool.configType}); nothing is written. Steps:`)
    for (const l of lines) yield* Console.log(`  ${l}`)
    yield* Console.log(`More: ${tool.docsUrl}`)
  })

export const setupTool = (
  id: string,
  opts: ConnectionOptions & { readonly dryRun: boolean; readonly yes: boolean; readonly offline: boolean; readonly json: boolean },
  nonInteractive: boolean
) =>
  Effect.gen(function* () {
    const tool = yield* toolOrFail(id)
    const module: ToolModule | undefined = TOOL_MODULES[tool.id]
    if (!module) return yield* setupGuide(tool, opts, opts.json)
    const env = processToolEnv()
    const state = yield* Effect.tryPromise({
      try: () => readToolState(module, env),
      catch: (e) => new BadRequest({ message: (e as Error).message })
    })
    const askable = !opts.yes && !nonInteractive && !opts.dryRun && !opts.json && process.stdin.isTTY === true
    if (!opts.yes && !nonInteractive && !opts.dryRun && !askable) {
      yield* Console.error("error: no terminal to ask on: pass --yes to write the files (or --dry-run to see them)")
      return yield* exitWith(2)
    }
    const target = yield* targetFor(opts, state.settings.model, opts.offline, askable && Option.isNone(opts.model))
    const changes = yield* Effect.tryPromise({
      try: () => planSetup(module, env, target),
      catch: (e) => new BadRequest({ message: (e as Error).message })
    })
    const userEnv = module.userEnv(target)
    const summary = {
      tool: tool.id,
      baseUrl: target.baseUrl,
      model: target.model,
      env: Object.fromEntries(Object.entries(userEnv).map(([k, v]) => [k, v === target.apiKey ? maskSecret(v) : v])),
      notes: module.notes
    }
    if (opts.dryRun) {
      const files = changes.map((c) => ({ path: c.path, exists: c.before !== undefined, content: maskIn(c.after, target.apiKey) }))
      if (opts.json) return yield* printJson({ ...summary, dryRun: true, files })
      if (files.length === 0)
        yield* Console.log(`${tool.name} already points at ${target.baseUrl} with model ${target.model}; nothing would change.`)
      for (const f of files)
        yield* Console.log(
          `# ${f.path}${f.exists ? " (would replace the file; a backup is kept)" : " (new file)"}; the key is shown masked\n${f.content}`
        )
      return yield* printFooter(userEnv, target.apiKey, module.notes, "would need")
    }
    if (askable && changes.length > 0) {
      for (const c of changes) yield* Console.log(`${c.before === undefined ? "create" : "update"} ${c.path}`)
      const ok = yield* Prompt.confirm({ message: `Point ${tool.name} at ${target.baseUrl} with model ${target.model}?`, initial: true })
      if (!ok) return yield* Console.log("nothing written")
    }
    const written = yield* Effect.tryPromise({
      try: () => applyChanges(changes),
      catch: (e) => new BadRequest({ message: `cannot write: ${(e as Error).message}` })
    })
    if (opts.json) return yield* printJson({ ...summary, dryRun: false, written })
    if (written.length === 0)
      yield* Console.log(`${tool.name} already points at ${target.baseUrl} with model ${target.model}; nothing changed.`)
    for (const w of written) yield* Console.log(`wrote ${w.path}${w.backup ? ` (previous version: ${w.backup})` : ""}`)
    yield* printFooter(userEnv, target.apiKey, module.notes, "needs")
  })

const printFooter = (env: Readonly<Record<string, string>>, key: string, notes: ReadonlyArray<string>, verb: string) =>
  Effect.gen(function* () {
    if (Object.keys(env).length > 0) {
      yield* Console.log(`\nThe tool ${verb} this in its environment (add it to your shell profile; the key is shown masked):`)
      for (const l of shellLine(env, key)) yield* Console.log(`  ${l}`)
    }
    for (const n of notes) yield* Console.log(`note: ${n}`)
  })

/** Spawns the tool with the gateway's environment and arguments; exits with its exit code. */
export const launchTool = (id: string, opts: ConnectionOptions, args: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const tool = yield* toolOrFail(id)
    const module = TOOL_MODULES[tool.id]
    if (!module)
      return yield* new BadRequest({
        message: `${tool.name} is not started from the command line with a gateway environment (configType ${tool.configType}); try \`gateway setup-${tool.id}\``
      })
    const bin = findOnPath(tool.command, process.env.PATH ?? "")
    if (!bin) {
      yield* Console.error(`error: '${tool.command}' was not found on the PATH; install ${tool.name} first (${tool.docsUrl})`)
      return yield* exitWith(127)
    }
    const target = yield* targetFor(opts, null, false, false)
    const code = yield* Effect.acquireUseRelease(
      Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), `gateway-launch-${tool.id}-`))),
      (dir) =>
        Effect.async<number>((resume) => {
          const launch = module.launch(target, dir)
          for (const [name, content] of Object.entries(launch.tempFiles ?? {}))
            fs.writeFileSync(path.join(dir, name), content, { mode: 0o600 })
          const child = spawn(bin, [...launch.args, ...args], { stdio: "inherit", env: { ...process.env, ...launch.env } })
          const forward = (signal: NodeJS.Signals) => () => child.kill(signal)
          const onInt = forward("SIGINT")
          const onTerm = forward("SIGTERM")
          process.on("SIGINT", onInt)
          process.on("SIGTERM", onTerm)
          child.on("error", (e) => {
            process.stderr.write(`error: cannot start ${bin}: ${e.message}\n`)
            resume(Effect.succeed(127))
          })
          child.on("close", (c, signal) => {
            process.off("SIGINT", onInt)
            process.off("SIGTERM", onTerm)
            resume(Effect.succeed(c ?? 128 + (signal ? (os.constants.signals[signal] ?? 0) : 0)))
          })
        }),
      (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
    )
    return yield* exitWith(code)
  })
