import * as CliConfig from "@effect/cli/CliConfig"
import * as Descriptor from "@effect/cli/CommandDescriptor"
import type * as HelpDoc from "@effect/cli/HelpDoc"
import type * as Span from "@effect/cli/HelpDoc/Span"
import * as Usage from "@effect/cli/Usage"
import * as HashSet from "effect/HashSet"
import { code } from "./markdown.js"
import { CLI_SKILL_IDS, type SkillId } from "../../domain/skills.js"

/**
 * The command-line skills' Authentication and Endpoints sections, from the `@effect/cli`
 * command tree of `gateway` (src/cli/app.ts): each command's usage, description, arguments and
 * options as its own `--help` states them. Every top-level command belongs to one skill by
 * `COMMAND_SKILLS`; a command missing from it is an error of the generator.
 */

/** Top-level command (or `prefix-*`) to CLI skill; `""` is `gateway` itself. A new command adds a line here. */
export const COMMAND_SKILLS: Readonly<Record<string, SkillId>> = {
  "": "cli-serve",
  config: "cli-serve",
  env: "cli-serve",
  update: "cli-serve",
  doctor: "cli-health",
  status: "cli-health",
  health: "cli-health",
  logs: "cli-health",
  inspect: "cli-health",
  providers: "cli-providers",
  provider: "cli-providers",
  keys: "cli-keys",
  users: "cli-keys",
  teams: "cli-keys",
  login: "cli-keys",
  logout: "cli-keys",
  models: "cli-models",
  test: "cli-chat",
  chat: "cli-chat",
  combo: "cli-routing",
  shadow: "cli-routing",
  replay: "cli-routing",
  resilience: "cli-resilience",
  compression: "cli-compression",
  context: "cli-contexts",
  quota: "cli-cost-usage",
  cache: "cli-cost-usage",
  usage: "cli-cost-usage",
  mcp: "cli-mcp",
  a2a: "cli-a2a",
  tunnel: "cli-tunnel",
  backup: "cli-backup-sync",
  restore: "cli-backup-sync",
  sync: "cli-backup-sync",
  db: "cli-backup-sync",
  policy: "cli-policy-audit",
  audit: "cli-policy-audit",
  batch: "cli-batches",
  eval: "cli-eval",
  skills: "cli-plugins-skills",
  plugins: "cli-plugins-skills",
  setup: "cli-setup",
  "setup-*": "cli-setup",
  launch: "cli-setup",
  "launch-*": "cli-setup",
  completion: "cli-setup",
  "reset-password": "cli-setup",
  "reset-encrypted-columns": "cli-setup"
}

export const skillOfCommand = (name: string): SkillId | undefined =>
  COMMAND_SKILLS[name] ??
  Object.entries(COMMAND_SKILLS).find(
    ([key]) => key.endsWith("-*") && name.startsWith(key.slice(0, -1)) && name.length > key.length - 1
  )?.[1]

/** The descriptor's shape as @effect/cli 0.77 builds it (its `_tag`s; the type itself is opaque). */
type Node =
  | { readonly _tag: "Standard" | "GetUserInput"; readonly name: string }
  | { readonly _tag: "Map"; readonly command: Node }
  | { readonly _tag: "Subcommands"; readonly parent: Node; readonly children: ReadonlyArray<Node> }

const asNode = (d: Descriptor.Command<unknown>): Node => d as unknown as Node
const asDescriptor = (n: Node): Descriptor.Command<unknown> => n as unknown as Descriptor.Command<unknown>

const spanText = (span: Span.Span): string => {
  switch (span._tag) {
    case "Sequence":
      return spanText(span.left) + spanText(span.right)
    case "Text":
    case "URI":
      return span.value
    default:
      return spanText(span.value)
  }
}

/** A help block as one line of text. */
const docText = (doc: HelpDoc.HelpDoc): string => {
  switch (doc._tag) {
    case "Empty":
      return ""
    case "Header":
    case "Paragraph":
      return spanText(doc.value).trim()
    case "Sequence":
      return [docText(doc.left), docText(doc.right)].filter((t) => t !== "").join(" ")
    case "Enumeration":
      return doc.elements.map(docText).join(" ")
    case "DescriptionList":
      return doc.definitions.map(([span, d]) => `${spanText(span)}: ${docText(d)}`).join(" ")
  }
}

/** The type sentence `--help` starts an entry with, where the usage (`--port integer`) already says it. */
const TYPE_SENTENCE = /^(A user-defined piece of text\.|A true or false value\.|An integer\.|A floating point number\.)\s*/

interface HelpSections {
  readonly description: string
  readonly entries: Record<string, Array<readonly [string, string]>>
}

/** The sections of a command's help (DESCRIPTION, ARGUMENTS, OPTIONS), built-in options left out. */
const helpSections = (node: Node): HelpSections => {
  const entries: Record<string, Array<readonly [string, string]>> = {}
  const paragraphs: Record<string, Array<string>> = {}
  let section = ""
  const walk = (doc: HelpDoc.HelpDoc): void => {
    if (doc._tag === "Sequence") {
      walk(doc.left)
      walk(doc.right)
    } else if (doc._tag === "Header") section = spanText(doc.value).trim()
    else if (doc._tag === "DescriptionList")
      (entries[section] ??= []).push(
        ...doc.definitions.map(([s, d]) => [spanText(s).trim(), docText(d).replace(TYPE_SENTENCE, "")] as const)
      )
    else if (doc._tag !== "Empty") (paragraphs[section] ??= []).push(docText(doc))
  }
  walk(Descriptor.getHelp(asDescriptor(node), { ...CliConfig.defaultConfig, showBuiltIns: false }))
  return { description: (paragraphs["DESCRIPTION"] ?? []).join(" "), entries }
}

const nameOf = (node: Node): string => [...HashSet.values(Descriptor.getNames(asDescriptor(node)))][0] ?? ""

const usageOf = (node: Node): string => docText(Usage.getHelp(Descriptor.getUsage(asDescriptor(node))))

export interface CommandDoc {
  /** `gateway keys add` */
  readonly path: string
  readonly usage: string
  readonly description: string
  readonly args: ReadonlyArray<readonly [string, string]>
  readonly options: ReadonlyArray<readonly [string, string]>
}

/** A command and its subcommands, depth first; `prefix` is the path of its parent. */
const commandDocs = (node: Node, prefix: string): Array<CommandDoc> => {
  if (node._tag === "Map") return commandDocs(node.command, prefix)
  if (node._tag === "Subcommands") {
    const [parent] = commandDocs(node.parent, prefix)
    return [...(parent ? [parent] : []), ...node.children.flatMap((c) => commandDocs(c, parent?.path ?? prefix))]
  }
  const help = helpSections(node)
  const path = prefix === "" ? node.name : `${prefix} ${node.name}`
  const usage = usageOf(node)
  return [
    {
      path,
      usage: prefix === "" ? usage : `${prefix} ${usage}`,
      description: help.description,
      args: help.entries["ARGUMENTS"] ?? [],
      options: help.entries["OPTIONS"] ?? []
    }
  ]
}

const renderCommand = (c: CommandDoc): Array<string> => [
  `### ${code(c.path)}`,
  "",
  ...(c.description ? [c.description, ""] : []),
  `Usage: ${code(c.usage)}`,
  "",
  ...(c.args.length > 0 ? ["Arguments:", "", ...c.args.map(([name, text]) => `- ${code(name)}: ${text}`), ""] : []),
  ...(c.options.length > 0 ? ["Options:", "", ...c.options.map(([name, text]) => `- ${code(name)}: ${text}`), ""] : [])
]

export interface CliSections {
  readonly authentication: string
  readonly endpoints: string
}

export interface CliSource {
  readonly sections: ReadonlyMap<SkillId, CliSections>
  readonly errors: ReadonlyArray<{ readonly code: string; readonly message: string }>
}

const REMOTE =
  "Commands with `--url` talk to the running server (default `http://127.0.0.1:<port>`, the port from `--port` or `PORT`). Their `--api-key` (default: the `GATEWAY_API_KEY` environment variable) is an admin API key unless the option's description says otherwise."
const LOCAL = "Commands without `--url` work on this machine: the database in `DATA_DIR` (or `--data-dir`), no server and no key needed."

/** Sections for the 20 CLI skills from the root command, and the top-level commands no skill claims. */
/** What the generator needs of the root `Command`. */
export interface CommandTree {
  readonly descriptor: Descriptor.Command<any>
}

export const cliSource = (root: CommandTree, related: (id: SkillId) => SkillId | undefined): CliSource => {
  const tree = asNode(root.descriptor)
  const top = tree._tag === "Subcommands" ? tree : undefined
  const bySkill = new Map<SkillId, Array<CommandDoc>>(CLI_SKILL_IDS.map((id) => [id, []]))
  const errors: Array<{ code: string; message: string }> = []
  const rootDoc = commandDocs(top ? top.parent : tree, "")
  bySkill.get(COMMAND_SKILLS[""]!)!.push(...rootDoc)
  for (const child of top?.children ?? []) {
    const name = nameOf(child)
    const skill = skillOfCommand(name)
    if (skill === undefined)
      errors.push({
        code: "unmapped-command",
        message: `gateway ${name} belongs to no skill: add it to COMMAND_SKILLS (src/cli/skills/cliSource.ts)`
      })
    else bySkill.get(skill)?.push(...commandDocs(child, rootDoc[0]?.path ?? "gateway"))
  }
  const sections = new Map<SkillId, CliSections>()
  for (const id of CLI_SKILL_IDS) {
    const docs = bySkill.get(id) ?? []
    const remote = docs.some((d) => d.options.some(([name]) => /^--url\b/.test(name)))
    const local = docs.some((d) => !d.options.some(([name]) => /^--url\b/.test(name)))
    const api = related(id)
    sections.set(id, {
      authentication: [
        ...(remote ? [REMOTE] : []),
        ...(local ? [LOCAL] : []),
        ...(docs.length === 0 ? ["No command of this version needs credentials here; see the REST skill below."] : [])
      ].join("\n\n"),
      endpoints: [
        ...(docs.length === 0
          ? [
              `No \`gateway\` command of this version belongs to this skill.${api ? ` The same area over HTTP: the ${code(api)} skill.` : ""}`,
              ""
            ]
          : []),
        ...docs.flatMap(renderCommand),
        ...(docs.length > 0 && api ? [`The same area over HTTP: the ${code(api)} skill.`] : [])
      ].join("\n")
    })
  }
  return { sections, errors }
}
