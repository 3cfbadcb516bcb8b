import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { BadGateway, BadRequest } from "../../../domain/errors.js"
import { connectionView } from "../../../upstream/providers/Connections.js"
import { OAuth } from "../../../services/oauth/OAuth.js"
import { ManagementApi } from "../Api.js"
import { makeCallbackBase } from "../callbackBase.js"
import { actor } from "../Principal.js"

/** OAuth connections (docs/operations.md, "OAuth connections"). */
const oauthGroup = HttpApiBuilder.group(ManagementApi, "oauth", (handlers) =>
  Effect.gen(function* () {
    const oauth = yield* OAuth
    const callbackBase = yield* makeCallbackBase
    return handlers
      .handle("authorize", ({ path, payload }) =>
        Effect.flatMap(callbackBase, (base) => oauth.startAuthorize(path.provider, payload, base))
      )
      .handle("complete", ({ path, payload }) => Effect.flatMap(actor, (a) => oauth.complete(path.provider, payload, a)))
      .handle("deviceCode", ({ path, payload }) => oauth.startDevice(path.provider, payload))
      .handle("poll", ({ path, payload }) => Effect.flatMap(actor, (a) => oauth.poll(path.provider, payload, a)))
      .handle("refresh", ({ path, payload }) =>
        Effect.gen(function* () {
          const c = yield* oauth.pick(path.provider, payload.connection)
          const refreshed = yield* Effect.mapError(oauth.refresh(c.id), (e) =>
            e.permanent ? new BadRequest({ message: e.message }) : new BadGateway({ message: e.message })
          )
          return { connection: connectionView(refreshed) }
        })
      )
      .handle("status", ({ path }) => oauth.status(path.provider))
      .handle("revoke", ({ path, payload }) =>
        Effect.flatMap(actor, (a) =>
          Effect.map(oauth.revoke(path.provider, payload.connection, a), (c) => ({ removed: connectionView(c) }))
        )
      )
  })
)

/** The browser's redirect: no management credentials, the flow's one-time state instead. */
const oauthCallbackGroup = HttpApiBuilder.group(ManagementApi, "oauthCallback", (handlers) =>
  Effect.gen(function* () {
    const oauth = yield* OAuth
    return handlers.handle("callback", ({ path, urlParams }) => {
      if (urlParams.error) {
        const url = `http://x/?${new URLSearchParams(Object.entries(urlParams).filter((e): e is [string, string] => typeof e[1] === "string")).toString()}`
        return oauth.complete(path.provider, { url }, "oauth-callback")
      }
      return oauth.complete(
        path.provider,
        { ...(urlParams.code ? { code: urlParams.code } : {}), state: urlParams.state ?? "" },
        "oauth-callback"
      )
    })
  })
)

/** The area's groups: the admin routes and the browser's redirect. */
export const layer = Layer.mergeAll(oauthGroup, oauthCallbackGroup)
