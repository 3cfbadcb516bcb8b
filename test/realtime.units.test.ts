import { describe, expect, it } from "vitest"
import { AttemptFailed } from "../src/kernel/attempts.js"
import { makeRealtimeSecrets } from "../src/inference/RealtimeSecrets.js"
import { ttlOf } from "../src/inference/routes/realtime.js"
import { elideAudio, usageOf } from "../src/server/realtimeSession.js"
import { realtimeUrl } from "../src/server/realtimeUpstream.js"

describe("realtime upstream URLs", () => {
  it("speaks wss: to an https: base URL and ws: only to loopback", () => {
    expect(realtimeUrl("https://api.openai.com/v1", "gpt-realtime")).toBe("wss://api.openai.com/v1/realtime?model=gpt-realtime")
    expect(realtimeUrl("http://127.0.0.1:8080/v1/", "m")).toBe("ws://127.0.0.1:8080/v1/realtime?model=m")
    expect(realtimeUrl("http://[::1]:8080/v1", "m")).toBe("ws://[::1]:8080/v1/realtime?model=m")
    const clear = realtimeUrl("http://voice.example/v1", "m")
    expect(clear).toBeInstanceOf(AttemptFailed)
    expect((clear as AttemptFailed).skip).toBe(true)
  })
})

describe("realtime events for the inspector", () => {
  it("elides base64 audio to its size and keeps everything else", () => {
    const audio = Buffer.alloc(3000, 1).toString("base64")
    expect(elideAudio({ type: "input_audio_buffer.append", audio })).toEqual({
      type: "input_audio_buffer.append",
      audio: "<audio: 3000 bytes>"
    })
    expect(elideAudio({ type: "response.output_audio.delta", delta: audio, item_id: "i" })).toEqual({
      type: "response.output_audio.delta",
      delta: "<audio: 3000 bytes>",
      item_id: "i"
    })
    const text = { type: "response.output_text.delta", delta: "x".repeat(100) }
    expect(elideAudio(text)).toEqual(text)
    expect(elideAudio({ type: "conversation.item.create", item: { content: [{ type: "input_audio", audio }] } })).toEqual({
      type: "conversation.item.create",
      item: { content: [{ type: "input_audio", audio: "<audio: 3000 bytes>" }] }
    })
  })

  it("reads text, audio and cached tokens from a response.done's usage", () => {
    expect(
      usageOf({
        input_tokens: 10,
        output_tokens: 20,
        input_token_details: { cached_tokens: 4, audio_tokens: 6, cached_tokens_details: { audio_tokens: 2 } },
        output_token_details: { audio_tokens: 15 }
      })
    ).toEqual({ input: 10, output: 20, cached: 4, audioIn: 6, cachedAudio: 2, audioOut: 15 })
    expect(usageOf({})).toEqual({ input: 0, output: 0, cached: 0, audioIn: 0, cachedAudio: 0, audioOut: 0 })
  })
})

describe("realtime client secrets", () => {
  it("live for their lifetime, bound to the key that minted them, and no longer", () => {
    let now = 1_000_000
    const secrets = makeRealtimeSecrets(() => now)
    const s = secrets.mint("key_a", 60)
    expect(secrets.isSecret(s.value)).toBe(true)
    expect(s.expiresAt).toBe(Math.floor((1_000_000 + 60_000) / 1000))
    expect(secrets.redeem(s.value)).toBe("key_a")
    now += 59_999
    expect(secrets.redeem(s.value)).toBe("key_a")
    now += 1
    expect(secrets.redeem(s.value)).toBeUndefined()
    expect(secrets.redeem("ek_unknown")).toBeUndefined()
  })

  it("take expires_after.seconds from 10 to 600, 60 by default", () => {
    expect(ttlOf({})).toBe(60)
    expect(ttlOf({ expires_after: { anchor: "created_at", seconds: 600 } })).toBe(600)
    expect(ttlOf({ expires_after: { seconds: 9 } })).not.toBeTypeOf("number")
    expect(ttlOf({ expires_after: { seconds: 601 } })).not.toBeTypeOf("number")
    expect(ttlOf({ expires_after: { anchor: "now", seconds: 60 } })).not.toBeTypeOf("number")
  })
})
