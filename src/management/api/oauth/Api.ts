import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as Schema from "effect/Schema"
import { ConnectionView } from "../../../domain/connections.js"
import { BadGateway, BadRequest, Conflict, NotFound } from "../../../domain/errors.js"
import {
  AuthorizeStarted,
  CallbackQuery,
  CompleteAuthorize,
  ConnectionRefPayload,
  DeviceStarted,
  OAuthConnected,
  OAuthStatus,
  PollDevice,
  PollResult,
  ProviderPath,
  StartAuthorize,
  StartDevice
} from "../../../domain/oauth.js"
import { ManagementAuth } from "../Principal.js"
import { CONFIGURATION, Roles } from "../Roles.js"

/**
 * OAuth connections, `/api/oauth/{provider}/{action}` (docs/operations.md, "OAuth connections").
 * Every action takes management authentication except the browser's redirect, below.
 */
export class OAuthGroup extends HttpApiGroup.make("oauth")
  .add(
    HttpApiEndpoint.post("authorize", "/api/oauth/:provider/authorize")
      .setPath(ProviderPath)
      .setPayload(StartAuthorize)
      .addSuccess(AuthorizeStarted)
      .addError(BadRequest)
      .addError(NotFound)
  )
  .add(
    HttpApiEndpoint.post("complete", "/api/oauth/:provider/callback")
      .setPath(ProviderPath)
      .setPayload(CompleteAuthorize)
      .addSuccess(OAuthConnected)
      .addError(BadRequest)
      .addError(NotFound)
      .addError(Conflict)
      .addError(BadGateway)
  )
  .add(
    HttpApiEndpoint.post("deviceCode", "/api/oauth/:provider/device-code")
      .setPath(ProviderPath)
      .setPayload(StartDevice)
      .addSuccess(DeviceStarted)
      .addError(BadRequest)
      .addError(NotFound)
      .addError(BadGateway)
  )
  .add(
    HttpApiEndpoint.post("poll", "/api/oauth/:provider/poll")
      .setPath(ProviderPath)
      .setPayload(PollDevice)
      .addSuccess(PollResult)
      .addError(BadRequest)
      .addError(NotFound)
      .addError(Conflict)
      .addError(BadGateway)
  )
  .add(
    HttpApiEndpoint.post("refresh", "/api/oauth/:provider/refresh")
      .setPath(ProviderPath)
      .setPayload(ConnectionRefPayload)
      .addSuccess(Schema.Struct({ connection: ConnectionView }))
      .addError(BadRequest)
      .addError(NotFound)
      .addError(BadGateway)
  )
  .add(HttpApiEndpoint.get("status", "/api/oauth/:provider/status").setPath(ProviderPath).addSuccess(OAuthStatus).addError(NotFound))
  .add(
    HttpApiEndpoint.post("revoke", "/api/oauth/:provider/revoke")
      .setPath(ProviderPath)
      .setPayload(ConnectionRefPayload)
      .addSuccess(Schema.Struct({ removed: ConnectionView }))
      .addError(BadRequest)
      .addError(NotFound)
  )
  .middleware(ManagementAuth)
  .annotate(Roles, CONFIGURATION) {}

/**
 * The authorization server's redirect of the user's browser (`GET /api/oauth/{provider}/callback`):
 * it carries no management credentials, so the one-time `state` of a flow an administrator
 * started (and its PKCE verifier, kept in the gateway) is what authorizes it.
 */
export class OAuthCallbackGroup extends HttpApiGroup.make("oauthCallback").add(
  HttpApiEndpoint.get("callback", "/api/oauth/:provider/callback")
    .setPath(ProviderPath)
    .setUrlParams(CallbackQuery)
    .addSuccess(OAuthConnected)
    .addError(BadRequest)
    .addError(NotFound)
    .addError(Conflict)
    .addError(BadGateway)
) {}
