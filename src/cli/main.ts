import * as CliConfig from "@effect/cli/CliConfig"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import { envFilePath } from "../platform/system/envFile.js"
import { rememberStartEnv } from "../platform/system/startEnv.js"
import { cli } from "./app.js"
import { cliLogger } from "./output.js"

// The env file (GATEWAY_ENV_FILE or ./.env): values already in the environment win.
rememberStartEnv(process.env)
const envFile = envFilePath()
if (fs.existsSync(envFile)) {
  try {
    process.loadEnvFile(envFile)
  } catch (e) {
    console.error(`gateway: cannot read the env file ${envFile}: ${(e as Error).message}`)
  }
}

cli(process.argv).pipe(
  Effect.provide(cliLogger),
  // Help lists the command's own options; the built-ins (--help, --version, --completions,
  // --log-level, --wizard) work everywhere and are documented once, in the root's description.
  Effect.provide(CliConfig.layer({ showBuiltIns: false })),
  Effect.provide(NodeContext.layer),
  NodeRuntime.runMain({ disablePrettyLogger: true })
)
