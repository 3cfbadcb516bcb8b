import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import { MEMORY_SCOPES } from "../../domain/context.js"
import { lazy } from "../handler.js"
import { json } from "../options.js"

const impl = () => import("./context.impl.js")

const scope = Options.choice("scope", MEMORY_SCOPES)

export const memoryListOptions = {
  scope: scope.pipe(Options.withDescription("Only entries of this scope."), Options.optional),
  tag: Options.text("tag").pipe(Options.withDescription("Only entries with this tag."), Options.optional),
  json
}
export const memoryAddOptions = {
  text: Args.text({ name: "text" }),
  scope: scope.pipe(
    Options.withDescription(
      "global (every request, the default), key (requests of the API key --scope-id) or session (requests whose X-Session-Id is --scope-id)."
    ),
    Options.optional
  ),
  scopeId: Options.text("scope-id").pipe(
    Options.withDescription("The API key id or session id a key or session entry applies to."),
    Options.optional
  ),
  tag: Options.text("tag").pipe(Options.repeated, Options.withDescription("A tag; repeat.")),
  disabled: Options.boolean("disabled").pipe(Options.withDescription("Add it switched off.")),
  json
}
export const idOptions = { id: Args.text({ name: "id" }), json }

export const skillListOptions = { json }
export const skillAddOptions = {
  name: Args.text({ name: "name" }),
  catalog: Options.text("catalog").pipe(
    Options.withDescription("An agent-skill catalog id (gw-inference, cli-chat, ...): its file is the text."),
    Options.optional
  ),
  text: Options.text("text").pipe(Options.withDescription("The skill's instructions."), Options.optional),
  file: Options.text("file").pipe(Options.withDescription("A file with the skill's instructions."), Options.optional),
  always: Options.boolean("always").pipe(Options.withDescription("Inject it into every request.")),
  keyword: Options.text("keyword").pipe(
    Options.repeated,
    Options.withDescription("Inject it when a user turn contains this (case-insensitive); repeat.")
  ),
  model: Options.text("model").pipe(
    Options.repeated,
    Options.withDescription("Inject it when the model asked matches this pattern (`*` any run of characters); repeat.")
  ),
  disabled: Options.boolean("disabled").pipe(Options.withDescription("Add it switched off.")),
  json
}
export const skillIdOptions = { id: Args.text({ name: "id-or-name" }), json }

const memoryList = Command.make(
  "list",
  memoryListOptions,
  lazy(impl, (m) => m.memoryList)
).pipe(Command.withDescription("List memory entries."))
const memoryAdd = Command.make(
  "add",
  memoryAddOptions,
  lazy(impl, (m) => m.memoryAdd)
).pipe(Command.withDescription("Add a memory entry: added to the system prompt of matching requests."))
const memoryRemove = Command.make(
  "remove",
  idOptions,
  lazy(impl, (m) => m.memoryRemove)
).pipe(Command.withDescription("Remove a memory entry."))
const memoryEnable = Command.make(
  "enable",
  idOptions,
  lazy(impl, (m) => m.memoryEnable)
).pipe(Command.withDescription("Switch a memory entry on."))
const memoryDisable = Command.make(
  "disable",
  idOptions,
  lazy(impl, (m) => m.memoryDisable)
).pipe(Command.withDescription("Switch a memory entry off (kept, not injected)."))
const memory = Command.make("memory").pipe(
  Command.withDescription("Memory entries injected into the system prompt within the token budget (x-gateway-no-memory: true skips them)."),
  Command.withSubcommands([memoryList, memoryAdd, memoryRemove, memoryEnable, memoryDisable])
)

const skillList = Command.make(
  "list",
  skillListOptions,
  lazy(impl, (m) => m.skillList)
).pipe(Command.withDescription("List injected skills."))
const skillAdd = Command.make(
  "add",
  skillAddOptions,
  lazy(impl, (m) => m.skillAdd)
).pipe(
  Command.withDescription(
    "Add a skill (one of --catalog, --text, --file) injected when its trigger matches (--always, --keyword, --model)."
  )
)
const skillRemove = Command.make(
  "remove",
  skillIdOptions,
  lazy(impl, (m) => m.skillRemove)
).pipe(Command.withDescription("Remove a skill."))
const skillEnable = Command.make(
  "enable",
  skillIdOptions,
  lazy(impl, (m) => m.skillEnable)
).pipe(Command.withDescription("Switch a skill on."))
const skillDisable = Command.make(
  "disable",
  skillIdOptions,
  lazy(impl, (m) => m.skillDisable)
).pipe(Command.withDescription("Switch a skill off (kept, not injected)."))
const skills = Command.make("skills").pipe(
  Command.withDescription(
    "Instruction files injected into the system prompt when their trigger matches (x-gateway-no-memory: true skips them)."
  ),
  Command.withSubcommands([skillList, skillAdd, skillRemove, skillEnable, skillDisable])
)

export const contextCommand = Command.make("context").pipe(
  Command.withDescription("Memory and skill injection in the local database (a running server sees changes within a second)."),
  Command.withSubcommands([memory, skills])
)
