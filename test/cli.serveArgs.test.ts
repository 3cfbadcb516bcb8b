import * as Command from "@effect/cli/Command"
import { describe, expect, it } from "vitest"
import { subcommands } from "../src/cli/app.js"
import { COMMAND_NAMES, serveArgs } from "../src/cli/serveArgs.js"

/**
 * The command lines that only start the server (src/cli/serveArgs.ts): these run the server alone,
 * from its code cache when built; every other line goes to the CLI's parser, which answers it as
 * before (test/serve-code-cache.process.test.ts runs both through the built gateway).
 */
describe("serveArgs: the command lines that only start the server", () => {
  it("reads `gateway` alone and the four serve options, in any order", () => {
    expect(serveArgs([])).toEqual({ noOpen: false })
    expect(serveArgs(["--port", "0"])).toEqual({ port: 0, noOpen: false })
    expect(serveArgs(["--port", "65535"])).toEqual({ port: 65535, noOpen: false })
    expect(serveArgs(["--no-open", "--data-dir", "./d", "--host", "0.0.0.0", "--port", "3000"])).toEqual({
      port: 3000,
      host: "0.0.0.0",
      dataDir: "./d",
      noOpen: true
    })
    expect(serveArgs(["--host", "::1"])).toEqual({ host: "::1", noOpen: false })
  })

  it.each([
    [["status"], "a subcommand"],
    [["--port", "3000", "status"], "a subcommand after the options"],
    [["--port"], "a flag without its value"],
    [["--port", "--host", "x"], "a value that is a flag"],
    [["--host", ""], "an empty value"],
    [["--port", "70000"], "a port the CLI refuses"],
    [["--port", "-1"], "a negative port"],
    [["--port", "3000.5"], "a fraction"],
    [["--port", "03000"], "a leading zero"],
    [["--port", " 3000"], "a space"],
    [["--port", "1e3"], "an exponent"],
    [["--port=3000"], "the = form"],
    [["--port", "1", "--port", "2"], "a flag twice"],
    [["--no-open", "--no-open"], "--no-open twice"],
    [["--workers", "2"], "--workers"],
    [["--tls-cert", "c.pem", "--tls-key", "k.pem"], "TLS"],
    [["--mcp"], "--mcp"],
    [["--json"], "--json"],
    [["--help"], "help"],
    [["--version"], "the version"],
    [["--log-level", "debug"], "a built-in option"],
    [["-h"], "a short flag"],
    [["--data-dir", "backup"], "a value the CLI reads as a command's name"],
    [["--host", "status"], "a value the CLI reads as a command's name"],
    [["--port", "3000", "--data-dir", "Logs"], "a command's name in capitals"]
  ])("leaves %j to the CLI (%s)", (args) => {
    expect(serveArgs(args)).toBeUndefined()
  })

  it("knows every command's name, as the CLI's tree has them", () => {
    // One command at a time: getNames of the tree's union of command types does not type-check.
    const names = subcommands.flatMap((c: (typeof subcommands)[number]) => [
      ...Command.getNames(c as Command.Command<string, unknown, unknown, unknown>)
    ])
    expect(new Set(names)).toEqual(COMMAND_NAMES)
  })
})
