import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as Schema from "effect/Schema"
import { strict } from "./parse.js"

/**
 * Configuration bundles, the sync server's store and the sync client (docs/operations.md,
 * "Cloud sync"). A bundle travels only as `ciphertext`, sealed with a passphrase the server never
 * sees (src/management/sync/envelope.ts); what is inside is `BundleContent`.
 */

// ---------------------------------------------------------------- the bundle (inside the envelope)

/** A stored row as the bundle carries it: column → value (no blobs in the bundled tables). */
export const BundleRow = Schema.Record({ key: Schema.String, value: Schema.Union(Schema.String, Schema.Number, Schema.Null) })
export type BundleRow = typeof BundleRow.Type

/** One `kv` entry; `secret` when the stored value was encrypted with the storage key (carried in plain inside the envelope). */
export const BundleSetting = Schema.Struct({
  namespace: Schema.String,
  key: Schema.String,
  value: Schema.String,
  secret: Schema.optional(Schema.Boolean)
})
export type BundleSetting = typeof BundleSetting.Type

/**
 * The sections a bundle carries (in this order in digests and conflict reports; new ones go at
 * the end, so digests of earlier configurations stay as they were); each replaces the receiver's
 * whole section on import. The last four came with schema 2 (`SCHEMA_2_SECTIONS`): a schema-1
 * bundle lacks them, and a section a bundle lacks is not carried, not empty (docs/operations.md,
 * "Cloud sync", "Bundles of an older gateway (schema 1)").
 */
export const BUNDLE_SECTIONS = [
  "connections",
  "oauthGrants",
  "apiKeys",
  "combos",
  "pricing",
  "budgets",
  "tokenLimits",
  "flags",
  "settings",
  "compressionCombos",
  "compressionAssignments",
  "memory",
  "skills",
  "mcpServers",
  "users",
  "teams",
  "teamMembers"
] as const
export type BundleSection = (typeof BUNDLE_SECTIONS)[number]

/** The sections schema 2 added: optional in a bundle (absent from one a schema-1 gateway made). */
export const SCHEMA_2_SECTIONS = [
  "compressionCombos",
  "compressionAssignments",
  "memory",
  "skills"
] as const satisfies ReadonlyArray<BundleSection>

/**
 * Sections a bundle may lack: schema 2's, `mcpServers` (migration 0023) and people and teams (0025), which a gateway before
 * it leaves out of its schema-2 bundles. Absent: not carried; absent or empty: left out of the digest.
 */
export const OPTIONAL_SECTIONS = [
  ...SCHEMA_2_SECTIONS,
  "mcpServers",
  "users",
  "teams",
  "teamMembers"
] as const satisfies ReadonlyArray<BundleSection>

/** The layout this build writes; it reads `BUNDLE_SCHEMAS`. */
export const BUNDLE_SCHEMA = 2
export const BUNDLE_SCHEMAS = [1, 2] as const

export const BundleContent = Schema.Struct({
  format: Schema.Literal("gateway-config"),
  /** The bundle layout; a receiver refuses a schema it does not know (schema 1: before the compression and context sections). */
  schema: Schema.Literal(...BUNDLE_SCHEMAS),
  createdAt: Schema.String,
  /** The database migrations of the gateway that made it: a receiver lacking one refuses it. */
  migrations: Schema.Array(Schema.String),
  sections: Schema.Struct({
    connections: Schema.Array(BundleRow),
    /** The rest of OAuth connections' grants (refresh and id tokens, expiry, account). */
    oauthGrants: Schema.Array(BundleRow),
    apiKeys: Schema.Array(BundleRow),
    combos: Schema.Array(BundleRow),
    pricing: Schema.Array(BundleRow),
    budgets: Schema.Array(BundleRow),
    tokenLimits: Schema.Array(BundleRow),
    flags: Schema.Array(BundleSetting),
    settings: Schema.Array(BundleSetting),
    // Schema 2 (migration 0018's configuration tables). Absent: not carried, so an import leaves
    // the receiver's rows as they are. compression_stats and rtk_raw_outputs are traffic, never bundled.
    /** `compression_combos`. */
    compressionCombos: Schema.optional(Schema.Array(BundleRow)),
    /** `compression_assignments` (each names a compression combo by `combo_id`). */
    compressionAssignments: Schema.optional(Schema.Array(BundleRow)),
    /** `context_memory`. */
    memory: Schema.optional(Schema.Array(BundleRow)),
    /** `context_skills`. */
    skills: Schema.optional(Schema.Array(BundleRow)),
    /** `mcp_servers` (migration 0023; `env_enc`, `headers_enc` carried decrypted). Absent from an older gateway's bundle: not carried. */
    mcpServers: Schema.optional(Schema.Array(BundleRow)),
    /** `users`, `teams`, `team_members` (migration 0025, docs/teams.md). Absent from an older gateway's bundle: not carried. */
    users: Schema.optional(Schema.Array(BundleRow)),
    teams: Schema.optional(Schema.Array(BundleRow)),
    teamMembers: Schema.optional(Schema.Array(BundleRow))
  })
})
export type BundleContent = typeof BundleContent.Type

/** What differs between two bundles, per section, by item name. */
export const SectionDiff = Schema.Struct({
  section: Schema.String,
  onlyLocal: Schema.Array(Schema.String),
  onlyRemote: Schema.Array(Schema.String),
  changed: Schema.Array(Schema.String)
})
export type SectionDiff = typeof SectionDiff.Type

/** Items per section of a bundle. */
export const BundleCounts = Schema.Record({ key: Schema.String, value: Schema.Number })

// ---------------------------------------------------------------- the sync server (/api/cloud/*)

export const SPACE_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/

export const SpaceName = Schema.String.pipe(
  Schema.filter((s) => SPACE_PATTERN.test(s), {
    message: () => "space must be 1 to 64 letters, digits, '.', '_' or '-' (starting with a letter or digit)"
  })
)

export const SpacePath = Schema.Struct({ space: SpaceName })

/** Most characters of one stored bundle (base64 text); the management body limit (1 MiB) is below it. */
export const MAX_CIPHERTEXT_CHARS = 1024 * 1024

export const PutBundle = Schema.Struct({
  /** The version the client's bundle is based on (0 for the first one); anything but the current version is a 409. */
  baseVersion: Schema.Int.pipe(Schema.nonNegative()),
  ciphertext: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(MAX_CIPHERTEXT_CHARS))
}).annotations(strict)
export type PutBundle = typeof PutBundle.Type

export const CloudVersionView = Schema.Struct({
  space: Schema.String,
  version: Schema.Number,
  size: Schema.Number,
  createdAt: Schema.String
})
export type CloudVersionView = typeof CloudVersionView.Type

export const CloudBundle = Schema.Struct({ ...CloudVersionView.fields, ciphertext: Schema.String })
export type CloudBundle = typeof CloudBundle.Type

export const CloudVersionList = Schema.Struct({
  space: Schema.String,
  current: Schema.Number,
  versions: Schema.Array(Schema.Struct({ version: Schema.Number, size: Schema.Number, createdAt: Schema.String }))
})
export type CloudVersionList = typeof CloudVersionList.Type

/** 409 of `PUT /api/cloud/bundles/{space}`: the bundle is not based on the current version. */
export class VersionConflict extends Schema.TaggedError<VersionConflict>()(
  "VersionConflict",
  { message: Schema.String, currentVersion: Schema.Number },
  HttpApiSchema.annotations({ status: 409 })
) {}

// ---------------------------------------------------------------- the sync client (/api/sync/*)

export const SyncInitialize = Schema.Struct({
  serverUrl: Schema.String.pipe(
    Schema.filter((s) => /^https?:\/\/[^\s/]+/i.test(s) && URL.canParse(s), {
      message: () => "serverUrl must be an http:// or https:// address of the sync server gateway"
    })
  ),
  apiKey: Schema.String.pipe(Schema.minLength(1, { message: () => "apiKey must be an admin API key of the sync server" })),
  space: SpaceName,
  passphrase: Schema.String.pipe(Schema.minLength(8, { message: () => "passphrase must be at least 8 characters" }), Schema.maxLength(1024))
}).annotations(strict)
export type SyncInitialize = typeof SyncInitialize.Type

export const SyncAction = Schema.Struct({
  action: Schema.Literal("push", "pull", "sync"),
  /** push: replace the server's bundle even when it changed since the base; pull: drop local changes. */
  force: Schema.optional(Schema.Boolean)
}).annotations(strict)
export type SyncAction = typeof SyncAction.Type

/** Why a push, pull or sync stopped: both sides changed since the last common version. */
export const ConflictReport = Schema.Struct({
  at: Schema.String,
  action: Schema.String,
  baseVersion: Schema.Number,
  remoteVersion: Schema.Number,
  localChanged: Schema.Boolean,
  remoteChanged: Schema.Boolean,
  sections: Schema.Array(SectionDiff),
  resolve: Schema.String
})
export type ConflictReport = typeof ConflictReport.Type

export class SyncConflict extends Schema.TaggedError<SyncConflict>()(
  "SyncConflict",
  { message: Schema.String, report: ConflictReport },
  HttpApiSchema.annotations({ status: 409 })
) {}

/** 502: the sync server did not answer, or answered something else than a sync server would. */
export class SyncServerError extends Schema.TaggedError<SyncServerError>()(
  "SyncServerError",
  { message: Schema.String },
  HttpApiSchema.annotations({ status: 502 })
) {}

export const SyncStatus = Schema.Struct({
  configured: Schema.Boolean,
  serverUrl: Schema.NullOr(Schema.String),
  space: Schema.NullOr(Schema.String),
  /** The server version this gateway last pushed or pulled (0: none yet). */
  localVersion: Schema.Number,
  /** The server's current version now (null when not configured or the server did not answer). */
  remoteVersion: Schema.NullOr(Schema.Number),
  remoteError: Schema.NullOr(Schema.String),
  /** Whether this gateway's configuration changed since that version. */
  localChanged: Schema.Boolean,
  lastPush: Schema.NullOr(Schema.String),
  lastPull: Schema.NullOr(Schema.String),
  lastConflict: Schema.NullOr(ConflictReport)
})
export type SyncStatus = typeof SyncStatus.Type

export const SyncResult = Schema.Struct({
  action: Schema.String,
  result: Schema.Literal("pushed", "pulled", "up-to-date"),
  version: Schema.Number,
  counts: BundleCounts
})
export type SyncResult = typeof SyncResult.Type
