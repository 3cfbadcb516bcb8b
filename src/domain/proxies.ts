import * as Schema from "effect/Schema"
import { oneOf, strict } from "./parse.js"

/**
 * Proxy registry entries (spec document 2, "Proxy registry entry", "Egress family policy
 * behavior"): the upstream proxies connections name (`proxyId`). docs/egress.md.
 */

export const PROXY_TYPES = ["http", "https", "socks5"] as const
export type ProxyType = (typeof PROXY_TYPES)[number]

export const PROXY_FAMILIES = ["auto", "ipv4", "ipv6"] as const
export type ProxyFamily = (typeof PROXY_FAMILIES)[number]

/** A stored family as read: anything but `ipv4` and `ipv6` (an old or hand-edited row) is `auto`. */
export const familyOf = (stored: unknown): ProxyFamily => (stored === "ipv4" || stored === "ipv6" ? stored : "auto")

export const ProxyFamilySchema = oneOf(PROXY_FAMILIES, "family")

const Name = Schema.Trim.pipe(
  Schema.minLength(1, { message: () => "name must not be empty" }),
  Schema.maxLength(64, { message: () => "name must be at most 64 characters" })
)

/** A host name or an IP literal (IPv6 with or without brackets); no scheme, port or path. */
const Host = Schema.Trim.pipe(
  Schema.transform(Schema.String, { strict: true, decode: (s) => s.replace(/^\[(.*)\]$/, "$1"), encode: (s) => s }),
  Schema.minLength(1, { message: () => "host must not be empty" }),
  Schema.maxLength(253, { message: () => "host must be at most 253 characters" }),
  Schema.pattern(/^([A-Za-z0-9_]([A-Za-z0-9_-]*[A-Za-z0-9_])?(\.[A-Za-z0-9_]([A-Za-z0-9_-]*[A-Za-z0-9_])?)*\.?|[0-9A-Fa-f:.]+)$/, {
    message: () => "host must be a host name or an IP address (no scheme, port or path)"
  })
)

const Port = Schema.Number.pipe(
  Schema.filter((n) => (Number.isInteger(n) && n >= 1 && n <= 65535 ? true : "port must be a whole number between 1 and 65535"))
)

const Credential = (field: string) =>
  Schema.String.pipe(Schema.maxLength(255, { message: () => `${field} must be at most 255 characters` }))

const fields = {
  name: Name,
  type: oneOf(PROXY_TYPES, "type"),
  host: Host,
  port: Port,
  /** Proxy credentials (HTTP Basic to the proxy, SOCKS5 user/password); the password is stored encrypted. */
  username: Schema.optional(Schema.NullOr(Credential("username"))),
  password: Schema.optional(Schema.NullOr(Credential("password"))),
  family: Schema.optional(ProxyFamilySchema),
  /** A free/public proxy (a marketplace entry): used only while FREE_PROXY_ENABLED is on. */
  free: Schema.optional(Schema.Boolean)
}

export const CreateProxy = Schema.Struct(fields).annotations(strict)
export type CreateProxy = typeof CreateProxy.Type

/** `PATCH`: any field; `id` may be repeated in the body (the spec's "required on update") and must match the path. */
export const PatchProxy = Schema.Struct({
  id: Schema.optional(Schema.String),
  name: Schema.optional(fields.name),
  type: Schema.optional(fields.type),
  host: Schema.optional(fields.host),
  port: Schema.optional(fields.port),
  username: fields.username,
  password: fields.password,
  family: fields.family,
  free: fields.free
}).annotations(strict)
export type PatchProxy = typeof PatchProxy.Type

export const ProxyView = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  type: Schema.Literal(...PROXY_TYPES),
  host: Schema.String,
  port: Schema.Number,
  username: Schema.NullOr(Schema.String),
  /** `****` when a password is stored, else null: never the password. */
  password: Schema.NullOr(Schema.String),
  family: Schema.Literal(...PROXY_FAMILIES),
  free: Schema.Boolean,
  /** The normalised proxy URL the dispatcher is built from (credentials masked, family marker included). */
  url: Schema.String,
  /** Connections that name this proxy. */
  usedBy: Schema.Array(Schema.String),
  createdAt: Schema.String,
  updatedAt: Schema.String
})
export type ProxyView = typeof ProxyView.Type
