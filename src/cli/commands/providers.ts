import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import { oneOf } from "../../domain/parse.js"
import { PROVIDER_CATEGORIES } from "../../domain/catalog/modelSpec.js"
import { lazy } from "../handler.js"
import { json } from "../options.js"
import { schemaOption } from "../schema.js"

const impl = () => import("./providers.impl.js")

export const availableOptions = {
  search: Options.text("search").pipe(Options.withDescription("Filter by id, name or model."), Options.optional),
  category: schemaOption("category", oneOf(PROVIDER_CATEGORIES, "category")).pipe(
    Options.withDescription(`One of ${PROVIDER_CATEGORIES.join(", ")}.`),
    Options.optional
  ),
  json
}
export const listOptions = { json }
export const testOptions = { id: Args.text({ name: "id-or-name" }), json }
export const testAllOptions = { json }
export const validateOptions = { json }

const available = Command.make(
  "available",
  availableOptions,
  lazy(impl, (m) => m.available)
).pipe(Command.withDescription("The provider catalog."))
const list = Command.make(
  "list",
  listOptions,
  lazy(impl, (m) => m.list)
).pipe(Command.withDescription("List provider connections from the local database (keys masked)."))
const test = Command.make(
  "test",
  testOptions,
  lazy(impl, (m) => m.test)
).pipe(Command.withDescription("Test one connection against its upstream (lists its models); exit 1 when it fails."))
const testAll = Command.make(
  "test-all",
  testAllOptions,
  lazy(impl, (m) => m.testAll)
).pipe(Command.withDescription("Test every connection; exit 1 when one fails."))
const validate = Command.make(
  "validate",
  validateOptions,
  lazy(impl, (m) => m.validate)
).pipe(Command.withDescription("Check stored connections for configuration problems (offline); exit 1 when one has a problem."))

export const providersCommand = Command.make("providers").pipe(
  Command.withDescription("The provider catalog and the local provider connections (no server needed)."),
  Command.withSubcommands([available, list, test, testAll, validate])
)
