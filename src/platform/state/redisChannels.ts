/**
 * Changes between the gateway processes on Redis: a change goes out as `<node id>|<encoded
 * change>` on `<prefix><topic>`; what comes in on the subscriber's `<prefix>*` is dispatched by
 * topic to the registered applies, never a node's own message.
 */
import * as Effect from "effect/Effect"
import type { Redis } from "ioredis"
import { type Codec, jsonCodec, type StateChannel } from "./SharedState.js"
import type { Scripted } from "./redisScripts.js"

const noop = () => {}

export interface RedisChannelsDeps {
  readonly pub: Scripted
  readonly sub: Redis
  readonly prefix: string
  /** This process's node id. */
  readonly node: string
  readonly up: () => boolean
  readonly runLog: (effect: Effect.Effect<void>) => unknown
}

/** Listens on the subscriber at once; answers `channel` (a topic's publish, its apply registered) and `subscribed` (the PSUBSCRIBE). */
export const makeRedisChannels = ({ pub, sub, prefix, node, up, runLog }: RedisChannelsDeps) => {
  const channelPrefix = prefix
  const handlers = new Map<string, Array<(text: string) => void>>()
  sub.on("pmessage", (_pattern: string, channel: string, message: string) => {
    if (!channel.startsWith(channelPrefix)) return
    const bar = message.indexOf("|")
    if (bar < 0 || message.slice(0, bar) === node) return
    const list = handlers.get(channel.slice(channelPrefix.length))
    if (list === undefined) return
    const text = message.slice(bar + 1)
    for (const deliver of list) deliver(text)
  })

  const subscribed = Effect.tryPromise(() => sub.psubscribe(`${channelPrefix}*`)).pipe(Effect.ignore)

  const channel = <A>(topic: string, apply: (change: A) => void, codec: Codec<A> = jsonCodec): StateChannel<A> => {
    let list = handlers.get(topic)
    if (list === undefined) handlers.set(topic, (list = []))
    list.push((text) => {
      try {
        apply(codec.decode(text))
      } catch (e) {
        runLog(
          Effect.logWarning(
            `shared state: a '${topic}' change from another process could not be applied: ${e instanceof Error ? e.message : String(e)}`
          )
        )
      }
    })
    const name = channelPrefix + topic
    return {
      shared: true,
      publish: (change) => {
        if (!up()) return
        let text: string
        try {
          text = codec.encode(change)
        } catch {
          return
        }
        pub.publish(name, `${node}|${text}`).catch(noop)
      }
    }
  }

  return { channel, subscribed }
}
