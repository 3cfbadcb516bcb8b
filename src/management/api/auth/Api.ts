import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as Schema from "effect/Schema"
import { LoginRequest, LoginResult, SessionInfo, SetupRequest } from "../../../domain/auth.js"
import { BadRequest, Conflict, Forbidden, TooManyRequests, Unauthorized } from "../../../domain/errors.js"

export class AuthGroup extends HttpApiGroup.make("auth")
  .add(
    HttpApiEndpoint.post("login", "/api/auth/login")
      .setPayload(LoginRequest)
      .addSuccess(LoginResult)
      .addError(Unauthorized)
      .addError(Forbidden)
      .addError(TooManyRequests)
  )
  .add(HttpApiEndpoint.post("logout", "/api/auth/logout").addSuccess(Schema.Struct({ ok: Schema.Boolean })))
  .add(HttpApiEndpoint.get("session", "/api/auth/session").addSuccess(SessionInfo))
  .add(
    HttpApiEndpoint.post("setup", "/api/auth/setup")
      .setPayload(SetupRequest)
      .addSuccess(LoginResult)
      .addError(BadRequest)
      .addError(Forbidden)
      .addError(Conflict)
      .addError(TooManyRequests)
      .addError(Unauthorized)
  ) {}
