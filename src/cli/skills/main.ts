/**
 * `npm run skills:generate` (built: `node dist/cli/skills/main.js`): regenerates the skill files in
 * GATEWAY_SKILLS_DIR, else the package's `skills/`. Flags: `--dry-run` (compare only), `--prune`
 * (delete `.md` files that are not skills), `--check` (dry run that exits 1 when a file would
 * change); other arguments are skill ids to limit it to. Prints the report; exits 1 on errors.
 * Also rewrites docs/teams.md's table of roles and routes (rolesDoc.ts) when the checkout has it.
 */
import * as Effect from "effect/Effect"
import * as path from "node:path"
import { generateSkills } from "./generate.js"
import { DEFAULT_SKILLS_DIR, isSkillId } from "../../services/skills/SkillCatalog.js"
import { PACKAGE_ROOT } from "../../kernel/packageRoot.js"
import { writeRolesDoc } from "./rolesDoc.js"

const args = process.argv.slice(2)
const flags = new Set(args.filter((a) => a.startsWith("--")))
const ids = args.filter((a) => !a.startsWith("--"))
const unknown = [...flags].filter((f) => !["--dry-run", "--prune", "--check"].includes(f))
const badIds = ids.filter((id) => !isSkillId(id))
if (unknown.length > 0 || badIds.length > 0) {
  console.error(
    `skills:generate: ${unknown.length > 0 ? `unknown option ${unknown.join(", ")}` : `unknown skill id ${badIds.join(", ")}`} (options: --dry-run, --prune, --check, skill ids)`
  )
  process.exit(2)
}
const check = flags.has("--check")
const dir = path.resolve(process.env.GATEWAY_SKILLS_DIR || DEFAULT_SKILLS_DIR)
const report = await Effect.runPromise(
  generateSkills(dir, { dryRun: check || flags.has("--dry-run"), prune: flags.has("--prune"), onlyIds: ids.length > 0 ? ids : undefined })
)
const rolesDoc = ids.length > 0 ? "missing" : writeRolesDoc(path.join(PACKAGE_ROOT, "docs", "teams.md"), check || flags.has("--dry-run"))
console.log(JSON.stringify({ ...report, rolesDoc }, null, 2))
if (report.errors.length > 0 || (check && (report.generated.length > 0 || report.pruned.length > 0 || rolesDoc === "changed")))
  process.exitCode = 1
