/**
 * Issue reports filed to a GitHub-compatible tracker. Stored settings win over the environment field by field; everything sent is
 * scrubbed of credentials (docs/files-batches.md, "Quota checks and issue reports").
 */
import * as Config from "effect/Config"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import { tryJson } from "../../upstream/formats/common.js"
import { badRequest, InferenceError } from "../../kernel/errors.js"
import { secretsOf } from "../sending.js"
import { secretScrubber } from "../../kernel/redact.js"
import { Connections } from "../../upstream/providers/Connections.js"
import { checkProviderUrl } from "../../upstream/providers/urlPolicy.js"
import { KeyValue } from "../../platform/store/KeyValue.js"
import { Secrets } from "../../platform/store/Secrets.js"
import { UpstreamHttp } from "../../upstream/client/UpstreamHttp.js"
import { VERSION } from "../../kernel/version.js"

export const DEFAULT_TRACKER_URL = "https://api.github.com"
export const ISSUE_KINDS = ["quota", "key_issuance", "provider_error", "other"] as const
export type IssueKind = (typeof ISSUE_KINDS)[number]

const NAMESPACE = "issues"
const KEY = "settings"
const REPOSITORY = /^[A-Za-z0-9_.-]{1,100}\/[A-Za-z0-9_.-]{1,100}$/
const TRACKER_HEADERS_MS = 15_000

export interface IssueReport {
  readonly title: string | undefined
  readonly kind: IssueKind
  readonly provider: string | undefined
  readonly connection: string | undefined
  readonly message: string
  readonly details: unknown
}

export interface FiledIssue {
  readonly ok: true
  readonly url: string | null
  readonly number: number | null
}

/** What `configure` takes: a field left out stays as it is, `null` removes the stored value (the environment's applies again). */
export interface TrackerSettingsInput {
  readonly repository?: string | null
  readonly token?: string | null
  readonly baseUrl?: string | null
}

/** The settings in force, without the token. */
export interface TrackerSettingsView {
  readonly repository: string | null
  readonly baseUrl: string
  readonly tokenSet: boolean
  readonly source: {
    readonly repository: "stored" | "env" | null
    readonly token: "stored" | "env" | null
    readonly baseUrl: "stored" | "env" | "default"
  }
}

export interface IssueTrackerShape {
  readonly settings: Effect.Effect<TrackerSettingsView>
  readonly configure: (input: TrackerSettingsInput) => Effect.Effect<TrackerSettingsView, InferenceError>
  /** Files a report; `secrets`: credentials the caller knows of beyond the connections' keys and the token (its own gateway key). */
  readonly report: (report: IssueReport, secrets: ReadonlyArray<string>, requestId: string) => Effect.Effect<FiledIssue, InferenceError>
}

interface Stored {
  readonly repository?: string
  readonly baseUrl?: string
  /** Encrypted with the storage key (Secrets). */
  readonly tokenEnc?: string
}

const str = (v: unknown): string | undefined => (typeof v === "string" && v.trim() !== "" ? v.trim() : undefined)

/** Validates the request body of `POST /v1/issues/report`: a 400 naming the field. */
export const decodeReport = (body: Record<string, unknown>): Effect.Effect<IssueReport, InferenceError> => {
  const fail = (message: string, param: string) => Effect.fail(badRequest(message, param))
  const kind = body["kind"]
  if (typeof kind !== "string" || !(ISSUE_KINDS as ReadonlyArray<string>).includes(kind))
    return fail(`kind must be one of ${ISSUE_KINDS.join(", ")}`, "kind")
  const message = body["message"]
  if (typeof message !== "string" || message.trim() === "") return fail("message is required (a non-empty string)", "message")
  if (message.length > 20_000) return fail("message is longer than 20000 characters", "message")
  for (const field of ["title", "provider", "connection"] as const) {
    const v = body[field]
    if (v !== undefined && v !== null && (typeof v !== "string" || v.length > 256))
      return fail(`${field} must be a string of at most 256 characters`, field)
  }
  const details = body["details"]
  if (details !== undefined && details !== null && (typeof details !== "object" || JSON.stringify(details).length > 20_000)) {
    return fail("details must be a JSON object or array of at most 20000 characters", "details")
  }
  return Effect.succeed({
    title: str(body["title"]),
    kind: kind as IssueKind,
    provider: str(body["provider"]),
    connection: str(body["connection"]),
    message,
    details: details ?? undefined
  })
}

/**
 * The issue's title and Markdown body, every text from the report scrubbed before it is cut or
 * laid out (a key cut in half, or split over two table cells, would no longer be recognised).
 */
const compose = (
  raw: IssueReport,
  requestId: string,
  scrub: (text: string) => string
): { readonly title: string; readonly body: string } => {
  const clean = (v: string | undefined) => (v === undefined ? undefined : scrub(v))
  const r: IssueReport = {
    ...raw,
    title: clean(raw.title),
    provider: clean(raw.provider),
    connection: clean(raw.connection),
    message: scrub(raw.message),
    details:
      raw.details === undefined ? undefined : (tryJson(scrub(JSON.stringify(raw.details))) ?? "(details withheld: not JSON once scrubbed)")
  }
  const about = r.connection ?? r.provider ?? "gateway"
  const firstLine = r.message.trim().split("\n")[0]!.slice(0, 100)
  const title = r.title ?? `[${r.kind}] ${about}: ${firstLine}`
  const lines = [
    r.message.trim(),
    "",
    "| | |",
    "|---|---|",
    `| Kind | ${r.kind} |`,
    ...(r.provider ? [`| Provider | ${r.provider} |`] : []),
    ...(r.connection ? [`| Connection | ${r.connection} |`] : []),
    `| Gateway | ${VERSION} |`,
    `| Request | ${requestId} |`,
    ...(r.details !== undefined ? ["", "```json", JSON.stringify(r.details, null, 2), "```"] : []),
    "",
    "_Filed by the gateway (POST /v1/issues/report). Secrets are masked._"
  ]
  return { title: title.slice(0, 256), body: lines.join("\n") }
}

const trackerFailure = (message: string, status = 502, code = "tracker_error") =>
  new InferenceError({ status, kind: status === 502 ? "upstream" : "permission", code, message })

export class IssueTracker extends Context.Tag("gateway/IssueTracker")<IssueTracker, IssueTrackerShape>() {
  static readonly layer = Layer.effect(
    IssueTracker,
    Effect.gen(function* () {
      const kv = yield* KeyValue
      const secrets = yield* Secrets
      const connections = yield* Connections
      const http = yield* UpstreamHttp
      const env = {
        repository: Option.getOrUndefined(yield* Config.string("GATEWAY_ISSUES_REPOSITORY").pipe(Config.option, Effect.orDie)),
        token: Option.getOrUndefined(yield* Config.redacted("GATEWAY_ISSUES_TOKEN").pipe(Config.option, Effect.orDie)),
        baseUrl: Option.getOrUndefined(yield* Config.string("GATEWAY_ISSUES_BASE_URL").pipe(Config.option, Effect.orDie))
      }

      const stored: Effect.Effect<Stored> = Effect.map(kv.get(NAMESPACE, KEY), (v) =>
        Option.isSome(v) ? ((tryJson(v.value) as Stored | undefined) ?? {}) : {}
      )

      /** The settings in force, the token decrypted (a stored token that no longer decrypts counts as unset, with a warning). */
      const resolve = Effect.gen(function* () {
        const s = yield* stored
        const token = s.tokenEnc
          ? yield* secrets.decrypt(s.tokenEnc).pipe(
              Effect.map((t): Redacted.Redacted<string> | undefined => t),
              Effect.catchAll(() =>
                Effect.as(Effect.logWarning("the stored issue-tracker token cannot be decrypted with the current storage key"), undefined)
              )
            )
          : undefined
        const repository = str(s.repository) ?? str(env.repository)
        const baseUrl = (str(s.baseUrl) ?? str(env.baseUrl) ?? DEFAULT_TRACKER_URL).replace(/\/+$/, "")
        const finalToken = token ?? (env.token && Redacted.value(env.token).trim() !== "" ? env.token : undefined)
        const view: TrackerSettingsView = {
          repository: repository ?? null,
          baseUrl,
          tokenSet: finalToken !== undefined,
          source: {
            repository: str(s.repository) ? "stored" : str(env.repository) ? "env" : null,
            token: token ? "stored" : finalToken ? "env" : null,
            baseUrl: str(s.baseUrl) ? "stored" : str(env.baseUrl) ? "env" : "default"
          }
        }
        return { repository, baseUrl, token: finalToken, view }
      })

      const configure = (input: TrackerSettingsInput) =>
        Effect.gen(function* () {
          const s = { ...(yield* stored) } as { repository?: string; baseUrl?: string; tokenEnc?: string }
          if (input.repository !== undefined) {
            if (input.repository === null) delete s.repository
            else if (!REPOSITORY.test(input.repository))
              return yield* Effect.fail(badRequest("repository must be owner/repo", "repository"))
            else s.repository = input.repository
          }
          if (input.baseUrl !== undefined) {
            if (input.baseUrl === null) delete s.baseUrl
            else if (!/^https?:\/\/[^\s]+$/.test(input.baseUrl))
              return yield* Effect.fail(badRequest("baseUrl must be an http(s) URL", "baseUrl"))
            else s.baseUrl = input.baseUrl
          }
          if (input.token !== undefined) {
            if (input.token === null || input.token.trim() === "") delete s.tokenEnc
            else s.tokenEnc = secrets.encrypt(input.token.trim())
          }
          yield* kv.set(NAMESPACE, KEY, JSON.stringify(s))
          return (yield* resolve).view
        })

      const report = (r: IssueReport, extra: ReadonlyArray<string>, requestId: string) =>
        Effect.gen(function* () {
          const settings = yield* resolve
          const missing = [
            ...(settings.repository ? [] : ["repository (GATEWAY_ISSUES_REPOSITORY)"]),
            ...(settings.token ? [] : ["token (GATEWAY_ISSUES_TOKEN)"])
          ]
          if (missing.length > 0) {
            return yield* Effect.fail(
              badRequest(
                `issue reports are not configured: set the tracker's ${missing.join(" and ")}`,
                settings.repository ? "token" : "repository",
                "issues_not_configured"
              )
            )
          }
          if (!REPOSITORY.test(settings.repository!))
            return yield* Effect.fail(
              badRequest(
                `the configured issue repository '${settings.repository}' is not owner/repo`,
                "repository",
                "issues_not_configured"
              )
            )
          const token = Redacted.value(settings.token!)
          const url = `${settings.baseUrl}/repos/${settings.repository}/issues`
          const verdict = checkProviderUrl(url, yield* connections.urlPolicy)
          if (!verdict.ok)
            return yield* Effect.fail(trackerFailure(`issue tracker URL blocked: ${verdict.reason}`, 403, "tracker_url_blocked"))

          // Every credential the gateway knows of, matched literally, plus the generic patterns.
          const known = [...(yield* connections.list).flatMap(secretsOf), ...extra, token]
          const scrub = secretScrubber(known)
          const { title, body } = compose(r, requestId, scrub)
          // Scrubbed again whole: the layout may have joined pieces into something key-shaped.
          const payload = JSON.stringify({ title: scrub(title), body: scrub(body), labels: ["gateway", r.kind] })

          const res = yield* http
            .request({
              url,
              method: "POST",
              headers: {
                authorization: `Bearer ${token}`,
                accept: "application/vnd.github+json",
                "x-github-api-version": "2022-11-28",
                "content-type": "application/json",
                "user-agent": http.userAgent
              },
              body: payload,
              headersTimeout: TRACKER_HEADERS_MS,
              readWhole: true
            })
            .pipe(Effect.mapError((e) => trackerFailure(`issue tracker unreachable (${e.kind}): ${scrub(e.message)}`)))
          const text = res.bytes?.toString("utf8") ?? ""
          const json = tryJson(text) as Record<string, unknown> | undefined
          if (res.status < 200 || res.status >= 300) {
            const said = typeof json?.["message"] === "string" ? json["message"] : text
            const why =
              res.status === 401 || res.status === 403
                ? "the tracker refused the token"
                : res.status === 404
                  ? "the tracker does not know the repository (or the token cannot see it)"
                  : "the tracker failed"
            return yield* Effect.fail(
              trackerFailure(`issue report not filed: ${why} (HTTP ${res.status}): ${scrub(String(said)).slice(0, 300)}`)
            )
          }
          const number = typeof json?.["number"] === "number" ? json["number"] : null
          const htmlUrl = typeof json?.["html_url"] === "string" ? json["html_url"] : null
          yield* Effect.logInfo(`issue report filed to ${settings.repository}${number !== null ? ` (#${number})` : ""}`)
          return { ok: true, url: htmlUrl, number } satisfies FiledIssue
        })

      return { settings: Effect.map(resolve, (s) => s.view), configure, report } satisfies IssueTrackerShape
    })
  )
}
