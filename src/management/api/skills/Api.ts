import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as OpenApi from "@effect/platform/OpenApi"
import { BadRequest, NotFound } from "../../../domain/errors.js"
import { GenerateReport, GenerateSkills, SkillCoverageView, SkillEntry, SkillList, SkillListQuery } from "../../../domain/skills.js"
import { IdPath, ManagementAuth } from "../Principal.js"
import { ADMIN_ONLY, Roles } from "../Roles.js"

const Markdown = HttpApiSchema.Text({ contentType: "text/markdown; charset=utf-8" })

/**
 * `/api/agent-skills`: the agent-skill catalog (docs/skills.md). Reading is public (the files
 * describe the API, they hold no data); regenerating needs management authentication.
 */
export class AgentSkillsGroup extends HttpApiGroup.make("agentSkills")
  .add(
    HttpApiEndpoint.get("list", "/api/agent-skills")
      .setUrlParams(SkillListQuery)
      .addSuccess(SkillList)
      .addError(BadRequest)
      .annotate(OpenApi.Summary, "The skills, optionally of one `category` (api, cli) or `area`; `rawUrl` on the origin the caller used.")
  )
  .add(
    HttpApiEndpoint.get("coverage", "/api/agent-skills/coverage")
      .addSuccess(SkillCoverageView)
      .annotate(OpenApi.Summary, "How many of the 22 API and 20 CLI skills are present, and when the newest was written.")
  )
  .add(
    HttpApiEndpoint.get("get", "/api/agent-skills/:id")
      .setPath(IdPath)
      .addSuccess(SkillEntry)
      .addError(NotFound)
      .annotate(OpenApi.Summary, "One skill's catalog entry.")
  )
  .add(
    HttpApiEndpoint.get("raw", "/api/agent-skills/:id/raw")
      .setPath(IdPath)
      .addSuccess(Markdown)
      .addError(NotFound)
      .annotate(OpenApi.Summary, "The skill file itself, as text/markdown.")
  )
  .add(
    HttpApiEndpoint.post("generate", "/api/agent-skills/generate")
      .setPayload(GenerateSkills)
      .addSuccess(GenerateReport)
      .addError(BadRequest)
      .middleware(ManagementAuth)
      .annotate(
        OpenApi.Summary,
        "Regenerates the skill files from the gateway's own definitions, keeping each file's custom section; `dryRun` compares only, `prune` deletes files that are not skills, `onlyIds` limits it."
      )
  )
  .annotate(Roles, ADMIN_ONLY) {}
