import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { AppConfig } from "../platform/config/AppConfig.js"
import { sequentialLayer } from "../platform/system/buildLayer.js"
import { CoreLayer } from "../server/CoreLayer.js"
import { cliLogger } from "./output.js"
import { cliConfig } from "./root.js"

/**
 * Runs an effect against the local database in DATA_DIR, with the same services the server
 * uses. SQLite in WAL mode lets this run while a server is up; the server sees the change
 * within a second. Heavy (the whole core): imported by `*.impl.ts` modules only.
 */
export const withLocalGateway = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function* () {
    const overrides = yield* cliConfig
    const config = AppConfig.layer(overrides)
    const layer = CoreLayer.pipe(Layer.provide(config), Layer.provideMerge(config), Layer.provide(cliLogger))
    return yield* Effect.provide(effect, sequentialLayer(layer))
  })
