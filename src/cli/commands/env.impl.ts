import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import { NotFound } from "../../domain/errors.js"
import { envFilePath, isSecretName, maskValue, readEnvFile, setEnvVariable } from "../../platform/system/envFile.js"
import type { Parsed } from "../handler.js"
import { printJson } from "../output.js"
import { appConfig } from "../root.js"
import type { envGetOptions, envSetOptions, envShowOptions } from "./env.js"

export const envShow = (opts: Parsed<typeof envShowOptions>) =>
  Effect.gen(function* () {
    const file = envFilePath()
    const vars = readEnvFile(file)
    const shown = Object.fromEntries(Object.entries(vars).map(([k, v]) => [k, isSecretName(k) ? maskValue(v) : v]))
    if (opts.json) return yield* printJson({ file, exists: fs.existsSync(file), variables: shown })
    if (!fs.existsSync(file)) return yield* Console.log(`${file}: no env file (gateway env set <name> <value> creates it)`)
    yield* Console.log(`# ${file}`)
    for (const [k, v] of Object.entries(shown)) yield* Console.log(`${k}=${v}`)
  })

export const envGet = (opts: Parsed<typeof envGetOptions>) =>
  Effect.gen(function* () {
    const value = readEnvFile(envFilePath())[opts.name]
    if (value === undefined) return yield* new NotFound({ message: `${opts.name} is not set in ${envFilePath()}` })
    yield* Console.log(value)
  })

export const envSet = (opts: Parsed<typeof envSetOptions>) =>
  Effect.gen(function* () {
    const file = envFilePath()
    const { backup } = setEnvVariable(file, (yield* appConfig).dataDir, opts.name, opts.value)
    yield* Console.log(
      `${opts.name} set in ${file}${backup ? ` (previous file kept as ${backup})` : ""}; a running gateway reads it on restart (POST /api/restart)`
    )
  })
