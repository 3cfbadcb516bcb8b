import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import { BadRequest, PayloadTooLarge } from "../../../domain/errors.js"
import { Plugins } from "../../../services/plugins/Plugins.js"
import { ManagementApi } from "../Api.js"

/** Plugins (docs/plugins.md, "Operating plugins"). */
export const layer = HttpApiBuilder.group(ManagementApi, "plugins", (handlers) =>
  Effect.map(Plugins, (plugins) => {
    const tooLarge = () =>
      new PayloadTooLarge({
        message: `the archive is larger than ${Math.round(plugins.maxUploadBytes / 1024 / 1024)} MB (PLUGIN_MAX_UPLOAD_MB)`
      })
    return handlers
      .handle("list", () => Effect.map(plugins.list, (list) => ({ plugins: list })))
      .handle("install", ({ payload }) => plugins.installPath(payload.path, payload.enable))
      .handle("upload", ({ urlParams }) =>
        Effect.gen(function* () {
          const req = yield* HttpServerRequest.HttpServerRequest
          if (Number(req.headers["content-length"] ?? 0) > plugins.maxUploadBytes) return yield* tooLarge()
          let size = 0
          const chunks = yield* req.stream.pipe(
            Stream.mapError(() => new BadRequest({ message: "the upload could not be read" })),
            Stream.tap((c) => {
              size += c.length
              return size > plugins.maxUploadBytes ? Effect.fail(tooLarge()) : Effect.void
            }),
            Stream.runCollect
          )
          if (size === 0)
            return yield* new BadRequest({ message: "the body is empty: send the plugin's .tgz (npm pack makes one) as the raw body" })
          return yield* plugins.installArchive(Buffer.concat(Chunk.toReadonlyArray(chunks)), urlParams.enable)
        })
      )
      .handle("get", ({ path }) => plugins.get(path.name))
      .handle("enable", ({ path }) => plugins.enable(path.name))
      .handle("disable", ({ path }) => plugins.disable(path.name))
      .handle("configure", ({ path, payload }) => plugins.configure(path.name, payload.values))
      .handle("remove", ({ path }) => Effect.as(plugins.remove(path.name), { removed: path.name }))
  })
)
