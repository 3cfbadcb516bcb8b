import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import { PACKAGE_NAME, VERSION } from "../../kernel/version.js"
import type { Parsed } from "../handler.js"
import { bold, colourOn, exitWith, printJson } from "../output.js"
import { withHttp } from "../remote.js"
import type { updateOptions } from "./update.js"

export const DEFAULT_REGISTRY = "https://registry.npmjs.org"

/** GATEWAY_UPDATE_REGISTRY, else npm's own setting, else the public registry. */
export const registryUrl = (): string =>
  (process.env.GATEWAY_UPDATE_REGISTRY?.trim() || process.env.npm_config_registry?.trim() || DEFAULT_REGISTRY).replace(/\/+$/, "")

/** What the check reads of a registry's package document (abbreviated metadata suffices). */
const Packument = Schema.Struct({ "dist-tags": Schema.Struct({ latest: Schema.String }) })

const SEMVER = /^v?(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?(?:\+.*)?$/

/**
 * Semver order of two versions: negative when `a` is older. A prerelease is older than its
 * release; prerelease identifiers compare numerically when both are numbers, else as text.
 * Unparseable versions compare as equal (nothing to offer).
 */
export const compareVersions = (a: string, b: string): number => {
  const pa = SEMVER.exec(a.trim())
  const pb = SEMVER.exec(b.trim())
  if (!pa || !pb) return 0
  for (let i = 1; i <= 3; i++) {
    const d = Number(pa[i]) - Number(pb[i])
    if (d !== 0) return d
  }
  const [ra, rb] = [pa[4], pb[4]]
  if (ra === rb) return 0
  if (ra === undefined) return 1
  if (rb === undefined) return -1
  const xa = ra.split(".")
  const xb = rb.split(".")
  for (let i = 0; i < Math.max(xa.length, xb.length); i++) {
    const [x, y] = [xa[i], xb[i]]
    if (x === undefined) return -1
    if (y === undefined) return 1
    const [nx, ny] = [/^\d+$/.test(x) ? Number(x) : NaN, /^\d+$/.test(y) ? Number(y) : NaN]
    const d = !isNaN(nx) && !isNaN(ny) ? nx - ny : !isNaN(nx) ? -1 : !isNaN(ny) ? 1 : x < y ? -1 : x > y ? 1 : 0
    if (d !== 0) return d
  }
  return 0
}

/** The package's document URL (a scoped name keeps its `@` and encodes its `/`). */
const documentUrl = (registry: string, name: string) =>
  `${registry}/${name.startsWith("@") ? `@${encodeURIComponent(name.slice(1))}` : encodeURIComponent(name)}`

/** The latest version the registry offers: 10 s per attempt, two more attempts on transport errors and 5xx. */
const latestVersion = (registry: string) =>
  Effect.gen(function* () {
    const client = (yield* HttpClient.HttpClient).pipe(HttpClient.filterStatusOk)
    const request = HttpClientRequest.get(documentUrl(registry, PACKAGE_NAME)).pipe(
      HttpClientRequest.setHeader("accept", "application/vnd.npm.install-v1+json; q=1.0, application/json; q=0.8")
    )
    return yield* client.execute(request).pipe(
      Effect.timeout("10 seconds"),
      Effect.retry({
        schedule: Schedule.exponential("200 millis").pipe(Schedule.intersect(Schedule.recurs(2))),
        while: (e) => e._tag === "TimeoutException" || e._tag === "RequestError" || (e._tag === "ResponseError" && e.response.status >= 500)
      }),
      Effect.flatMap(HttpClientResponse.schemaBodyJson(Packument)),
      Effect.map((p) => p["dist-tags"].latest),
      Effect.scoped,
      Effect.mapError((e) =>
        e._tag === "ResponseError" && e.response.status === 404
          ? `${PACKAGE_NAME} is not on ${registry}`
          : e._tag === "ParseError"
            ? `${registry} answered something that is not a package document`
            : `${registry} cannot be read (${e._tag === "ResponseError" ? `HTTP ${e.response.status}` : e._tag === "TimeoutException" ? "timed out" : "unreachable"})`
      )
    )
  })

export const update = (opts: Parsed<typeof updateOptions>) =>
  Effect.gen(function* () {
    const registry = registryUrl()
    const outcome = yield* Effect.either(latestVersion(registry))
    if (outcome._tag === "Left") {
      if (opts.json) yield* printJson({ name: PACKAGE_NAME, current: VERSION, registry, error: outcome.left })
      else yield* Console.error(`error: ${outcome.left}`)
      return yield* exitWith(1)
    }
    const latest = outcome.right
    const updateAvailable = compareVersions(VERSION, latest) < 0
    const command = `npm install -g ${PACKAGE_NAME}@${latest}`
    if (opts.json)
      yield* printJson({ name: PACKAGE_NAME, current: VERSION, latest, updateAvailable, registry, ...(updateAvailable ? { command } : {}) })
    else if (updateAvailable) {
      yield* Console.log(`${PACKAGE_NAME} ${latest} is available (this is ${VERSION}). To update:`)
      yield* Console.log(`  ${bold(command, colourOn(process.stdout))}`)
      yield* Console.log("then restart the gateway. Nothing was changed.")
    } else yield* Console.log(`${PACKAGE_NAME} ${VERSION} is the latest version on ${registry}`)
    if (updateAvailable) yield* exitWith(1)
  }).pipe(withHttp)
