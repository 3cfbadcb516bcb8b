import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as Schema from "effect/Schema"
import { BadGateway, BadRequest, Conflict, Forbidden, NotFound } from "../../../domain/errors.js"
import {
  CreateOidcProvider,
  OidcCallbackQuery,
  OidcCliToken,
  OidcDevicePoll,
  OidcDevicePollResult,
  OidcDeviceStarted,
  OidcIdPath,
  OidcLoginQuery,
  OidcProviderList,
  OidcProviderRemoved,
  OidcProviderView,
  PasswordLogin,
  PatchOidcProvider,
  PublicOidcProviders,
  SsoSession
} from "../../../domain/sso.js"
import { ManagementAuth } from "../Principal.js"
import { CONFIGURATION, Roles } from "../Roles.js"

/** A redirect of the browser (`Location`): to the provider, back to the dashboard, or to the CLI's loopback. */
const Redirect = Schema.Void

/**
 * Single sign-on's public routes (docs/sso.md): the login page's list of providers (id and name
 * only), a browser's sign-in and the provider's redirect back, the CLI's device grant (proxied:
 * the gateway holds the client secret) and its loopback hand-off, and whether the admin password
 * signs in. No management credentials: each step is authorized by its one-time state, handle or code.
 */
export class SsoPublicGroup extends HttpApiGroup.make("ssoPublic")
  .add(HttpApiEndpoint.get("providers", "/api/auth/oidc/providers").addSuccess(PublicOidcProviders))
  .add(
    HttpApiEndpoint.get("login", "/api/auth/oidc/:id/login")
      .setPath(OidcIdPath)
      .setUrlParams(OidcLoginQuery)
      .addSuccess(Redirect, { status: 302 })
      .addError(BadRequest)
      .addError(Forbidden)
      .addError(NotFound)
      .addError(BadGateway)
  )
  .add(
    HttpApiEndpoint.get("callback", "/api/auth/oidc/:id/callback")
      .setPath(OidcIdPath)
      .setUrlParams(OidcCallbackQuery)
      .addSuccess(Redirect, { status: 302 })
      .addError(BadRequest)
      .addError(Forbidden)
      .addError(NotFound)
      .addError(BadGateway)
  )
  .add(
    HttpApiEndpoint.post("deviceStart", "/api/auth/oidc/:id/device")
      .setPath(OidcIdPath)
      .addSuccess(OidcDeviceStarted)
      .addError(BadRequest)
      .addError(Forbidden)
      .addError(NotFound)
      .addError(BadGateway)
  )
  .add(
    HttpApiEndpoint.post("devicePoll", "/api/auth/oidc/:id/device/poll")
      .setPath(OidcIdPath)
      .setPayload(OidcDevicePoll)
      .addSuccess(OidcDevicePollResult)
      .addError(BadRequest)
      .addError(Forbidden)
      .addError(NotFound)
      .addError(BadGateway)
  )
  .add(HttpApiEndpoint.post("cliToken", "/api/auth/oidc/cli/token").setPayload(OidcCliToken).addSuccess(SsoSession).addError(BadRequest))
  .add(HttpApiEndpoint.get("passwordLogin", "/api/auth/password-login").addSuccess(PasswordLogin)) {}

/** The providers' configuration and the password switch (admins; docs/sso.md, "Configuring a provider"). */
export class SsoGroup extends HttpApiGroup.make("sso")
  .add(HttpApiEndpoint.get("list", "/api/auth/oidc/config/providers").addSuccess(OidcProviderList))
  .add(
    HttpApiEndpoint.post("create", "/api/auth/oidc/config/providers")
      .setPayload(CreateOidcProvider)
      .addSuccess(OidcProviderView, { status: 201 })
      .addError(BadRequest)
      .addError(Conflict)
  )
  .add(
    HttpApiEndpoint.get("get", "/api/auth/oidc/config/providers/:id").setPath(OidcIdPath).addSuccess(OidcProviderView).addError(NotFound)
  )
  .add(
    HttpApiEndpoint.patch("update", "/api/auth/oidc/config/providers/:id")
      .setPath(OidcIdPath)
      .setPayload(PatchOidcProvider)
      .addSuccess(OidcProviderView)
      .addError(BadRequest)
      .addError(NotFound)
      .addError(Forbidden)
  )
  .add(
    HttpApiEndpoint.del("remove", "/api/auth/oidc/config/providers/:id")
      .setPath(OidcIdPath)
      .addSuccess(OidcProviderRemoved)
      .addError(NotFound)
      .addError(Forbidden)
  )
  // The same provider routes at the path the login page lists them from (the and the
  // dashboard's name for them): POST adds one here, the public GET beside it stays id and name only.
  .add(
    HttpApiEndpoint.post("add", "/api/auth/oidc/providers")
      .setPayload(CreateOidcProvider)
      .addSuccess(OidcProviderView, { status: 201 })
      .addError(BadRequest)
      .addError(Conflict)
  )
  .add(HttpApiEndpoint.get("read", "/api/auth/oidc/providers/:id").setPath(OidcIdPath).addSuccess(OidcProviderView).addError(NotFound))
  .add(
    HttpApiEndpoint.patch("change", "/api/auth/oidc/providers/:id")
      .setPath(OidcIdPath)
      .setPayload(PatchOidcProvider)
      .addSuccess(OidcProviderView)
      .addError(BadRequest)
      .addError(NotFound)
      .addError(Forbidden)
  )
  .add(
    HttpApiEndpoint.del("delete", "/api/auth/oidc/providers/:id")
      .setPath(OidcIdPath)
      .addSuccess(OidcProviderRemoved)
      .addError(NotFound)
      .addError(Forbidden)
  )
  .add(
    HttpApiEndpoint.put("setPasswordLogin", "/api/auth/password-login")
      .setPayload(PasswordLogin)
      .addSuccess(PasswordLogin)
      .addError(BadRequest)
  )
  .middleware(ManagementAuth)
  .annotate(Roles, CONFIGURATION) {}
