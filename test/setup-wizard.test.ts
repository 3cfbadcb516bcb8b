import * as NodeContext from "@effect/platform-node/NodeContext"
import * as Terminal from "@effect/platform/Terminal"
import * as Cause from "effect/Cause"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import type * as Mailbox from "effect/Mailbox"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Redacted from "effect/Redacted"
import { describe, expect, it } from "vitest"
import { AdminAuth } from "../src/services/auth/AdminAuth.js"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { cli } from "../src/cli/app.js"
import { PROVIDERS } from "../src/domain/catalog/catalog.js"
import { Connections } from "../src/upstream/providers/Connections.js"
import { fakeOpenAIForFile } from "./support/fakeOpenAI.js"
import { startGateway, tempDir } from "./support/gateway.js"

const press = (name: string, input?: string): Terminal.UserInput => ({
  input: Option.fromNullable(input),
  key: { name, ctrl: false, meta: false, shift: false }
})
const type = (text: string) => [...text].map((ch) => press(ch, ch))
const enter = press("enter")
const answer = (text: string) => [...type(text), enter]

/** A terminal that types a script: prompts take one keystroke at a time, so nothing is lost between prompts. */
const scriptedTerminal = (inputs: ReadonlyArray<Terminal.UserInput>, screen: Array<string>) =>
  Layer.effect(
    Terminal.Terminal,
    Effect.gen(function* () {
      const queue = yield* Queue.unbounded<Terminal.UserInput>()
      yield* Queue.offerAll(queue, inputs)
      const take = Queue.take(queue).pipe(
        Effect.timeoutFail({ duration: "3 seconds", onTimeout: () => new Cause.NoSuchElementException("script ran out of keystrokes") })
      )
      return Terminal.Terminal.of({
        columns: Effect.succeed(100),
        rows: Effect.succeed(40),
        isTTY: Effect.succeed(true),
        readLine: Effect.succeed(""),
        readInput: Effect.succeed({ take } as unknown as Mailbox.ReadonlyMailbox<Terminal.UserInput>),
        display: (text) => Effect.sync(() => void screen.push(text))
      })
    })
  )

/** Runs `gateway --data-dir <dir> setup` in-process with typed keystrokes; returns what was displayed. */
const runSetup = async (dataDir: string, script: ReadonlyArray<Terminal.UserInput>): Promise<Array<string>> => {
  const screen: Array<string> = []
  await Effect.runPromise(
    cli(["node", "gateway", "--data-dir", dataDir, "setup"]).pipe(
      Effect.provide(scriptedTerminal(script, screen)),
      Effect.provide(NodeContext.layer),
      Effect.provide(Logger.replace(Logger.defaultLogger, Logger.none)),
      Effect.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map())))
    )
  )
  return screen
}

const fake = fakeOpenAIForFile()

describe("gateway setup (interactive wizard)", () => {
  it("sets the password, creates a key and adds a tested provider from typed answers", async () => {
    const dataDir = tempDir()
    const down = Array.from({ length: PROVIDERS.findIndex((p) => p.id === "openai-compatible") }, () => press("down"))
    const script = [
      ...answer("wizard password 1"), // admin password
      ...answer("wizard password 1"), // repeat
      press("y", "y"), // create an API key
      press("n", "n"), // not admin
      press("y", "y"), // add a provider
      ...down,
      enter, // openai-compatible
      ...answer("wiz"), // connection name
      ...answer(fake.upstream.baseUrl), // base URL
      ...answer("sk-wizard"), // API key
      ...answer("m1"), // default model
      press("y", "y"), // test it now
      press("n", "n") // no more providers
    ]
    const screen = await runSetup(dataDir, script)
    expect(process.exitCode ?? 0).toBe(0)
    expect(screen.join("")).toContain("Admin password")

    // What the wizard wrote is what a server on the same data directory sees.
    const gw = await startGateway({ dataDir })
    try {
      const { keys, connection, hasPassword } = await gw.run(
        Effect.all({
          keys: Effect.flatMap(ApiKeys, (k) => k.list),
          connection: Effect.flatMap(Connections, (c) => c.get("wiz")),
          hasPassword: Effect.flatMap(AdminAuth, (a) => a.hasPassword)
        })
      )
      expect(hasPassword).toBe(true)
      expect(keys.map((k) => [k.name, k.scopes])).toEqual([["setup", ["inference"]]])
      expect(connection.provider.id).toBe("openai-compatible")
      expect(connection.effectiveBaseUrl).toBe(fake.upstream.baseUrl)
      expect(connection.defaultModel).toBe("m1")
      expect(Redacted.value(connection.apiKey!)).toBe("sk-wizard")
      expect(connection.testStatus).toBe("active")
      const login = await fetch(`${gw.url}/api/auth/login`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ password: "wizard password 1" })
      })
      expect(login.status).toBe(200)
    } finally {
      await gw.close()
    }
    expect(fake.upstream.requests.some((r) => r.path === "/v1/models" && r.headers.authorization === "Bearer sk-wizard")).toBe(true)
  })

  it("refuses a short password at the prompt and asks again", async () => {
    const dataDir = tempDir()
    const script = [
      ...answer("short"), // refused by the prompt's validation
      ...Array.from({ length: 5 }, () => press("backspace")),
      ...answer("long enough pw"),
      ...answer("long enough pw"),
      press("n", "n"), // no key
      press("n", "n") // no provider
    ]
    const screen = await runSetup(dataDir, script)
    expect(screen.join("")).toContain("at least 8 characters")
    const gw = await startGateway({ dataDir })
    try {
      const res = await fetch(`${gw.url}/api/auth/login`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ password: "long enough pw" })
      })
      expect(res.status).toBe(200)
    } finally {
      await gw.close()
    }
  })
})
