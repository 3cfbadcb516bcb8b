import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { NotFound } from "../../../domain/errors.js"
import { NoArgs, SkillsGetArgs, SkillsListArgs, SkillsRunArgs } from "../../../domain/mcp.js"
import type { SkillCatalogShape } from "../../../services/skills/SkillCatalog.js"
import type { SkillRunnerShape } from "../../../services/skills/SkillRunner.js"
import { actorOf } from "../caller.js"
import { type McpTool, tool } from "../tool.js"

/** The three discovery tools of the spec ("Agent skill discovery"), over the one SkillCatalog. */
export const catalogTools = (catalog: SkillCatalogShape): ReadonlyArray<McpTool> => [
  tool({
    name: "gateway_agent_skills_list",
    title: "List agent skills",
    scope: "read:catalog",
    description:
      "Lists the gateway's agent skills: markdown guides to its REST API and its command line. " +
      "Filter with category (api or cli) and area (the id without gw-). " +
      "Each entry has id, name, description, category, area and rawUrl, where the markdown file can be fetched.",
    args: SkillsListArgs,
    readOnly: true,
    run: (args, { caller }) =>
      Effect.map(catalog.list({ category: args.category, area: args.area }, caller.baseUrl), (skills) => ({ skills }))
  }),
  tool({
    name: "gateway_agent_skills_get",
    title: "Read an agent skill",
    scope: "read:catalog",
    description:
      "Returns one agent skill by id: its metadata and its markdown file. " +
      "Ids are gw-<area> for REST API skills and cli-<area> for command-line skills; gateway_agent_skills_list names those present.",
    args: SkillsGetArgs,
    readOnly: true,
    run: (args, { caller }) =>
      Effect.flatMap(catalog.get(args.id.trim(), caller.baseUrl), (found) =>
        Option.isNone(found)
          ? Effect.fail(new NotFound({ message: `no agent skill '${args.id}'; gateway_agent_skills_list names the skills present` }))
          : Effect.succeed({ skill: found.value.skill, markdown: found.value.markdown })
      ),
    // The metadata as JSON, then the markdown itself, so a client shows the file as it is.
    render: (answer) => [JSON.stringify(answer.skill, null, 2), String(answer.markdown)]
  }),
  tool({
    name: "gateway_agent_skills_coverage",
    title: "Agent skill coverage",
    scope: "read:catalog",
    description:
      "Reports how many of the catalog's skills are present: api and cli, each with have and total, totalSkills, and generatedAt (when the newest skill file was written).",
    args: NoArgs,
    readOnly: true,
    run: () => Effect.map(catalog.coverage, (coverage) => ({ ...coverage }))
  })
]

/** Runs one of a skill's scripts in the sandbox (docs/skills.md, "Scripts"). */
export const skillRunTool = (runner: SkillRunnerShape): McpTool =>
  tool({
    name: "skills_run",
    title: "Run a skill's script",
    scope: "run:skills",
    description:
      "Runs one script of an agent skill (a JavaScript module in the skill's scripts folder) in a sandbox and returns its exitCode, stdout, stderr and durationMs. " +
      `The script reads only its skill's folder, is stopped after ${Math.round(runner.limits.timeoutMs / 1000)} s or ${Math.round(runner.limits.memoryLimitBytes / 1024 / 1024)} MB, ` +
      "and has no network unless the gateway allows it, then only to the hosts its skill names. An entry of gateway_agent_skills_list lists its scripts.",
    args: SkillsRunArgs,
    readOnly: false,
    openWorld: true,
    run: (args, { caller }) => Effect.map(runner.run(args, actorOf(caller)), (result) => ({ ...result }))
  })
