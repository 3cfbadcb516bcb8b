import type { ComponentChildren } from "preact"
import { useEffect, useState } from "preact/hooks"

/** The dashboard lives under /dashboard/ (the gateway serves index.html for every path below it). */
export const BASE = "/dashboard"

const listeners = new Set<() => void>()
const notify = () => listeners.forEach((f) => f())
addEventListener("popstate", notify)

/** The page path below /dashboard ("/" for the overview) and the query. */
export const current = (): { path: string; query: URLSearchParams } => {
  const p = location.pathname.startsWith(BASE) ? location.pathname.slice(BASE.length) : location.pathname
  return { path: p === "" ? "/" : p.replace(/\/+$/, "") || "/", query: new URLSearchParams(location.search) }
}

export const navigate = (to: string, replace = false) => {
  const url = BASE + (to.startsWith("/") ? to : `/${to}`)
  if (replace) history.replaceState(null, "", url)
  else history.pushState(null, "", url)
  scrollTo(0, 0)
  notify()
}

/** Re-renders on navigation. */
export const useLocation = () => {
  const [, set] = useState(0)
  useEffect(() => {
    const f = () => set((n) => n + 1)
    listeners.add(f)
    return () => void listeners.delete(f)
  }, [])
  return current()
}

/** A link inside the dashboard: a real <a href> (open in new tab works), navigation without reload. */
export const Link = (props: {
  to: string
  children: ComponentChildren
  class?: string
  title?: string
  "aria-current"?: "page" | undefined
}) => {
  const { to, children, ...rest } = props
  return (
    <a
      {...rest}
      href={BASE + to}
      onClick={(e) => {
        if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return
        e.preventDefault()
        navigate(to)
      }}
    >
      {children}
    </a>
  )
}
