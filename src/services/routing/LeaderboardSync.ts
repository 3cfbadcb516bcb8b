/**
 * The leaderboard ELO sync (`LEADERBOARD_ELO_SYNC_ENABLED`): only with `GATEWAY_LEADERBOARD_URL` set, so a default install
 * makes no outbound call; its ELOs override the auto engine's task fitness per model (docs/feature-flags.md).
 */
import * as Config from "effect/Config"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import { backgroundJob } from "../../platform/flags/background.js"
import { FeatureFlags } from "../../platform/flags/FeatureFlags.js"
import { periodic } from "../../platform/system/periodic.js"
import { UpstreamHttp } from "../../upstream/client/UpstreamHttp.js"
import { AutoEngine } from "./AutoEngine.js"
import { parseLeaderboard } from "./auto/leaderboard.js"

const SyncConfig = Config.all({
  url: Config.option(Config.string("GATEWAY_LEADERBOARD_URL")),
  seconds: Config.number("GATEWAY_LEADERBOARD_SYNC_INTERVAL_SECONDS").pipe(Config.withDefault(86_400))
})

const retry = Schedule.exponential("500 millis").pipe(Schedule.jittered, Schedule.intersect(Schedule.recurs(3)))

export const LeaderboardSync = Layer.scopedDiscard(
  Effect.gen(function* () {
    const config = yield* SyncConfig.pipe(Effect.orDie)
    const url = Option.getOrUndefined(config.url)?.trim()
    if (!url || config.seconds <= 0) return
    if (!(yield* backgroundJob("leaderboard sync"))) return
    const flags = yield* FeatureFlags
    const engine = yield* AutoEngine
    const http = yield* UpstreamHttp

    const download = http
      .request({
        url,
        method: "GET",
        headers: { accept: "application/json", "user-agent": http.userAgent },
        headersTimeout: Duration.seconds(30),
        readWhole: true,
        maxBodyBytes: 16 * 1024 * 1024
      })
      .pipe(
        Effect.flatMap((res) =>
          res.status >= 200 && res.status < 300
            ? Effect.succeed(res.bytes?.toString("utf8") ?? "")
            : Effect.fail(new Error(`HTTP ${res.status}`))
        ),
        Effect.timeout(Duration.seconds(30)),
        Effect.retry(retry)
      )

    const round = Effect.gen(function* () {
      if (!(yield* flags.enabled("LEADERBOARD_ELO_SYNC_ENABLED"))) {
        engine.leaderboard.clear()
        return
      }
      const text = yield* Effect.either(download)
      if (text._tag === "Left")
        return yield* Effect.logWarning(`leaderboard sync: ${url} could not be read (${text.left.message}); the last snapshot stays`)
      let json: unknown
      try {
        json = JSON.parse(text.right)
      } catch {
        return yield* Effect.logWarning(`leaderboard sync: ${url} did not answer JSON; the last snapshot stays`)
      }
      const entries = parseLeaderboard(json)
      if (entries.length === 0) return yield* Effect.logWarning(`leaderboard sync: ${url} listed no valid entry; the last snapshot stays`)
      engine.leaderboard.set(entries)
      yield* Effect.logInfo(`leaderboard sync: ${entries.length} ELOs from ${url}`)
    })

    yield* periodic("leaderboard sync", config.seconds, round, { immediately: true })
  })
)
