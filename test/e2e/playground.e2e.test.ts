import { execFile } from "node:child_process"
import { promisify } from "node:util"
import { writeFileSync } from "node:fs"
import * as path from "node:path"
import type { Browser, Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { FakeImages, makePng } from "../support/fakeImages.js"
import { FakeUpstream } from "../support/fakeUpstream.js"
import { refusedPort } from "../support/refusedPort.js"
import { tempDir } from "../support/gateway.js"
import {
  type DashboardGateway,
  expectAccessible,
  expectNoProblems,
  goTo,
  launchBrowser,
  login,
  openPage,
  PASSWORD,
  screenshot,
  startDashboardGateway
} from "./harness.js"

// The Playground page, driven through the browser: a streamed chat answer with its metrics, three
// models compared with one failing, a preset saved and loaded again, prompt improvement with its
// diff, and the curl and TypeScript code copied from the page run as they are.

const run = promisify(execFile)

describe("dashboard: playground", () => {
  let browser: Browser
  let gw: DashboardGateway
  let alpha: FakeUpstream
  let beta: FakeUpstream
  let images: FakeImages
  beforeAll(async () => {
    images = await FakeImages.start(makePng([255, 0, 0, 255]))
    browser = await launchBrowser()
    alpha = await FakeUpstream.start()
    beta = await FakeUpstream.start()
    alpha.always({ content: "alpha answer streamed in pieces", chunks: 6, chunkDelayMs: 40, usage: { input: 12, output: 6 } })
    beta.always({ content: "beta answer" })
    gw = await startDashboardGateway({ password: PASSWORD })
    const add = (name: string, baseUrl: string) =>
      gw.admin("POST", "/api/providers", { provider: "openai-compatible", name, baseUrl, models: ["m1"] })
    expect((await add("alpha", alpha.baseUrl("openai-chat"))).status).toBe(201)
    expect((await add("beta", beta.baseUrl("openai-chat"))).status).toBe(201)
    expect((await add("broken", `http://127.0.0.1:${await refusedPort()}/v1`)).status).toBe(201)
    expect(
      (
        await gw.admin("POST", "/api/providers", {
          provider: "openai",
          name: "oai",
          apiKey: "sk-images-upstream",
          baseUrl: `${images.url}/v1`
        })
      ).status
    ).toBe(201)
  })
  afterAll(async () => {
    await browser?.close()
    await gw?.stop()
    await alpha?.close()
    await beta?.close()
    await images?.close()
  })

  const open = async () => {
    const opened = await openPage(browser)
    await login(opened.page, gw.url)
    await goTo(opened.page, "Playground")
    return opened
  }
  const column = (page: Page, model: string) => page.locator(`.pg-column[data-model="${model}"]`)

  it("streams a chat answer with time to first token, tokens per second, token counts and an estimated cost", async () => {
    const { page, problems, context } = await open()
    await page.getByLabel("Model", { exact: true }).fill("alpha/m1")
    await page.getByLabel("Prompt", { exact: true }).fill("Say hi")
    await page.getByRole("button", { name: "Send" }).click()
    const col = column(page, "alpha/m1")
    await col.locator("[data-answer]", { hasText: "alpha answer streamed in pieces" }).waitFor()
    await col.locator(".badge", { hasText: "done" }).waitFor()
    expect(await col.locator('[data-metric="ttft"]').textContent()).toMatch(/^\d+(\.\d+)? (ms|s)$/)
    expect(await col.locator('[data-metric="tps"]').textContent()).toMatch(/^\d+(\.\d+)?$/)
    expect(await col.locator('[data-metric="tokens"]').textContent()).toBe("12 / 6")
    expect(await col.getByText("Cost (estimate)").count()).toBe(1)
    expect(alpha.requests.at(-1)!.body.messages.at(-1).content).toBe("Say hi")
    await expectAccessible(page, "playground")
    await screenshot(page, "playground")
    expectNoProblems(problems)
    await context.close()
  })

  it("compares three models in parallel; the one that fails says why and stops none of the others", async () => {
    const { page, problems, context } = await open()
    await page.getByLabel("Model", { exact: true }).fill("alpha/m1")
    await page.getByLabel("Prompt", { exact: true }).fill("Compare")
    await page.getByLabel("Compare with other models").check()
    await page.getByLabel("Model 2").fill("beta/m1")
    await page.getByLabel("Model 3").fill("broken/m1")
    await page.getByRole("button", { name: "Send" }).click()
    await column(page, "alpha/m1").locator("[data-answer]", { hasText: "alpha answer streamed in pieces" }).waitFor()
    await column(page, "beta/m1").locator("[data-answer]", { hasText: "beta answer" }).waitFor()
    const broken = column(page, "broken/m1")
    await broken.locator("[data-error]").waitFor()
    expect(await broken.locator(".badge").textContent()).toBe("failed")
    expect(await broken.locator("[data-error]").textContent()).toMatch(/^5\d\d: /)
    await screenshot(page, "playground-compare")
    // The failing column's answer is an HTTP error on purpose.
    expect(
      problems.filter(
        (p) =>
          !/^HTTP 5\d\d: POST \/v1\/chat\/completions$|^console error: Failed to load resource: the server responded with a status of 5\d\d/.test(
            p
          )
      )
    ).toEqual([])
    await context.close()
  })

  it("saves a preset and loads it again after a reload", async () => {
    const { page, problems, context } = await open()
    await page.getByLabel("Model", { exact: true }).fill("beta/m1")
    await page.getByLabel("System prompt").fill("You are terse.")
    await page.getByLabel("temperature").fill("0.3")
    await page.getByLabel("Preset name").fill("Terse beta")
    await page.getByRole("button", { name: "Save as preset" }).click()
    await page.getByText("Preset Terse beta saved").waitFor()
    const stored = (await gw.admin("GET", "/api/playground/presets")).body.presets
    expect(stored).toMatchObject([
      { name: "Terse beta", endpoint: "chat-completions", model: "beta/m1", system: "You are terse.", params_json: '{"temperature":0.3}' }
    ])
    await page.reload()
    await page.getByRole("heading", { level: 1, name: "Playground" }).waitFor()
    expect(await page.getByLabel("Model", { exact: true }).inputValue()).toBe("")
    await page.getByLabel("Load a preset").selectOption({ label: "Terse beta (chat-completions)" })
    expect(await page.getByLabel("Model", { exact: true }).inputValue()).toBe("beta/m1")
    expect(await page.getByLabel("System prompt").inputValue()).toBe("You are terse.")
    expect(await page.getByLabel("temperature").inputValue()).toBe("0.3")
    expectNoProblems(problems)
    await context.close()
  })

  it("shows an improvement as a diff before applying it", async () => {
    const { page, problems, context } = await open()
    await page.getByLabel("Model", { exact: true }).fill("beta/m1")
    await page.getByLabel("Prompt", { exact: true }).fill("fix my code")
    beta.next({ content: JSON.stringify({ improvedPrompt: "Find the bug in my code and explain the fix step by step." }) })
    await page.getByRole("button", { name: "Improve prompt" }).click()
    const dialog = page.getByRole("dialog", { name: "Suggested improvement" })
    await dialog.locator(".diff-del", { hasText: "fix my code" }).waitFor()
    await dialog.locator(".diff-add", { hasText: "Find the bug in my code and explain the fix step by step." }).waitFor()
    await dialog.getByRole("button", { name: "Apply" }).click()
    expect(await page.getByLabel("Prompt", { exact: true }).inputValue()).toBe("Find the bug in my code and explain the fix step by step.")
    expectNoProblems(problems)
    await context.close()
  })

  it("another endpoint has its own form and rendering: embeddings summarised as vectors, its code using its own route", async () => {
    const { page, problems, context } = await open()
    await page.getByLabel("Endpoint").selectOption({ label: "Embeddings" })
    expect(await page.getByLabel("System prompt").count()).toBe(0)
    await page.getByLabel("Model", { exact: true }).fill("beta/m1")
    await page.getByLabel("Prompt", { exact: true }).fill("vector me")
    await page.getByRole("button", { name: "Send" }).click()
    const answer = page.locator("[data-answer]")
    await answer.waitFor()
    expect(await answer.textContent()).toMatch(/^1 vector of \d+ dimensions; first values /)
    expect(beta.requests.at(-1)!.path).toBe("/v1/embeddings")
    expect(await page.locator('[data-snippet="curl"]').textContent()).toContain("/v1/embeddings")
    expectNoProblems(problems)
    await context.close()
  })

  it("images: the generated image is shown", async () => {
    const { page, problems, context } = await open()
    await page.getByLabel("Endpoint").selectOption({ label: "Images" })
    await page.getByLabel("Model", { exact: true }).fill("oai/gpt-image-2")
    await page.getByLabel("Prompt", { exact: true }).fill("a red pixel")
    await page.getByRole("button", { name: "Send" }).click()
    const img = page.locator(".pg-images img")
    await img.waitFor()
    expect(
      await img.evaluate(
        (el) =>
          (el as unknown as { naturalWidth: number; complete: boolean }).complete &&
          (el as unknown as { naturalWidth: number }).naturalWidth > 0
      )
    ).toBe(true)
    expect(images.requests.at(-1)!.json.prompt).toBe("a red pixel")
    expectNoProblems(problems)
    await context.close()
  })

  it("the curl and TypeScript code on the page run as copied, with the key from $GATEWAY_API_KEY", async () => {
    const { page, problems, context } = await open()
    await page.getByLabel("Model", { exact: true }).fill("beta/m1")
    await page.getByLabel("Prompt", { exact: true }).fill("From a snippet")
    await page.getByLabel("Language").selectOption("curl")
    const curl = (await page.locator('[data-snippet="curl"]').textContent())!
    expect(curl).toContain("$GATEWAY_API_KEY")
    expect(curl).not.toContain(gw.adminKey)
    const env = { PATH: process.env.PATH ?? "/usr/bin:/bin", GATEWAY_API_KEY: gw.adminKey }
    // Run without blocking this process: the fake upstreams answer from it.
    const fromCurl = JSON.parse((await run("bash", ["-c", curl], { env })).stdout)
    expect(fromCurl.choices[0].message.content).toBe("beta answer")
    expect(beta.requests.at(-1)!.body.messages.at(-1).content).toBe("From a snippet")
    await page.getByLabel("Language").selectOption("typescript")
    const ts = (await page.locator('[data-snippet="typescript"]').textContent())!
    expect(ts).not.toContain(gw.adminKey)
    const file = path.join(tempDir("gw-snippet-"), "snippet.mjs")
    writeFileSync(file, ts)
    const fromTs = JSON.parse((await run(process.execPath, [file], { env })).stdout)
    expect(fromTs.choices[0].message.content).toBe("beta answer")
    expectNoProblems(problems)
    await context.close()
  })
})
