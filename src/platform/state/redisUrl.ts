/** REDIS_URL checks and masking: no ioredis here, so the configuration loads without it. */

/** `redis://user:***@host:port/db`: the URL as logs and errors may show it. */
export const maskRedisUrl = (url: string): string => {
  try {
    const u = new URL(url)
    if (u.password) u.password = "***"
    return u.toString()
  } catch {
    return "<invalid URL>"
  }
}

/** Why `url` is not a Redis URL the gateway accepts (`redis://` or `rediss://` with a host), or undefined when it is. */
export const invalidRedisUrl = (url: string): string | undefined => {
  let u: URL
  try {
    u = new URL(url)
  } catch {
    return "REDIS_URL is not a URL (expected redis://[user:password@]host[:port][/db] or rediss://…)"
  }
  if (u.protocol !== "redis:" && u.protocol !== "rediss:") return `REDIS_URL must start with redis:// or rediss:// (got ${u.protocol}//)`
  if (u.hostname === "") return "REDIS_URL has no host"
  const db = u.pathname.replace(/^\//, "")
  if (db !== "" && !/^\d+$/.test(db)) return `REDIS_URL's database must be a number (got /${db})`
  return undefined
}
