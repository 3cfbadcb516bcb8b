import type { Strategy } from "../types.js"

/** `priority`: the combo's order, as given. */
export const priority: Strategy = {
  name: "priority",
  order: (candidates) => candidates.slice()
}
