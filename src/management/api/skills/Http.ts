import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type * as http from "node:http"
import { NotFound } from "../../../domain/errors.js"
import { FeatureFlags } from "../../../platform/flags/FeatureFlags.js"
import { requestOrigin } from "../../../platform/http/request.js"
import { SkillCatalog } from "../../../services/skills/SkillCatalog.js"
import { ManagementApi } from "../Api.js"

/** `/api/agent-skills*`: list, coverage, one entry, the raw file, regenerate. */
export const layer = HttpApiBuilder.group(ManagementApi, "agentSkills", (handlers) =>
  Effect.gen(function* () {
    const catalog = yield* SkillCatalog
    const flags = yield* FeatureFlags
    const origin = Effect.gen(function* () {
      const req = yield* HttpServerRequest.HttpServerRequest
      return requestOrigin(req.source as http.IncomingMessage, yield* flags.enabled("GATEWAY_TRUST_PROXY_HEADERS"))
    })
    const found =
      (id: string) =>
      <A>(o: Option.Option<A>) =>
        Option.match(o, {
          onNone: () => Effect.fail(new NotFound({ message: `no agent skill '${id.slice(0, 100)}'` })),
          onSome: Effect.succeed
        })
    return handlers
      .handle("list", ({ urlParams }) =>
        Effect.map(
          Effect.flatMap(origin, (o) => catalog.list(urlParams, o)),
          (skills) => ({ skills })
        )
      )
      .handle("coverage", () => catalog.coverage)
      .handle("get", ({ path }) =>
        Effect.flatMap(
          Effect.flatMap(origin, (o) => catalog.get(path.id, o)),
          found(path.id)
        ).pipe(Effect.map((f) => f.skill))
      )
      .handle("raw", ({ path }) => Effect.flatMap(catalog.get(path.id), found(path.id)).pipe(Effect.map((f) => f.markdown)))
      .handle("generate", ({ payload }) => catalog.generate(payload))
  })
)
