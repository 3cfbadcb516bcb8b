/**
 * docs/teams.md's table of who may call each management route ("Roles and access"), generated
 * from the route table (`routeAccessTable`, the routes' `Roles` annotations) between two markers,
 * so the page cannot drift from what the gateway enforces. `npm run skills:generate` rewrites it
 * (`--check` reports it stale); a test compares it.
 */
import * as fs from "node:fs"
import { ROLES } from "../../domain/teams.js"
import { routeAccessTable } from "../../management/api/routeAccess.js"

export const ROLES_BEGIN = "<!-- roles:begin (generated from the routes' Roles annotations by `npm run skills:generate`; do not edit) -->"
export const ROLES_END = "<!-- roles:end -->"

const AUTH_NOTE: Record<string, string> = {
  management: "",
  playground: " (also any gateway key; no key on a loopback bind with REQUIRE_API_KEY off)",
  metrics: " (also GATEWAY_METRICS_TOKEN)"
}

/** The generated block: one row per authenticated route, in the API's order, then the public ones. */
export const rolesTable = (): string => {
  const table = routeAccessTable()
  const rows = table
    .filter((r) => r.auth !== "public")
    .map(
      (r) =>
        `| \`${r.id}\` | \`${r.method} ${r.path}\`${AUTH_NOTE[r.auth] ?? ""} | ${ROLES.map((role) => (r.roles.includes(role) ? "✓" : "")).join(" | ")} |`
    )
  const open = table.filter((r) => r.auth === "public").map((r) => `\`${r.method} ${r.path}\``)
  return [
    ROLES_BEGIN,
    "",
    `| Route | Method and path | ${ROLES.join(" | ")} |`,
    `|---|---|${ROLES.map(() => ":-:").join("|")}|`,
    ...rows,
    "",
    `Without authentication, for anyone: ${open.join(", ")}.`,
    "",
    ROLES_END
  ].join("\n")
}

/** `text` with its generated block replaced (or undefined when the page has no markers). */
export const withRolesTable = (text: string): string | undefined => {
  const begin = text.indexOf(ROLES_BEGIN)
  const end = text.indexOf(ROLES_END)
  if (begin === -1 || end === -1 || end < begin) return undefined
  return text.slice(0, begin) + rolesTable() + text.slice(end + ROLES_END.length)
}

/**
 * Rewrites the block in `file` (docs/teams.md of a checkout; an installed package has no docs/):
 * `changed` when it was (or, with `check`, would be) different; `missing` when there is no page
 * or no markers.
 */
export const writeRolesDoc = (file: string, check: boolean): "changed" | "unchanged" | "missing" => {
  if (!fs.existsSync(file)) return "missing"
  const text = fs.readFileSync(file, "utf8")
  const next = withRolesTable(text)
  if (next === undefined) return "missing"
  if (next === text) return "unchanged"
  if (!check) fs.writeFileSync(file, next)
  return "changed"
}
