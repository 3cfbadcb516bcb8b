import { useState } from "preact/hooks"
import { toast } from "../../ui"

/** An action whose failure is shown next to its controls (the API's message), as a load's is. */
export const useInline = (): [(f: () => Promise<unknown>, done?: string) => Promise<boolean>, boolean, string | undefined] => {
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState<string>()
  const run = async (f: () => Promise<unknown>, done?: string) => {
    setBusy(true)
    setError(undefined)
    try {
      await f()
      if (done) toast(done)
      return true
    } catch (e) {
      setError(e instanceof Error ? e.message : String(e))
      return false
    } finally {
      setBusy(false)
    }
  }
  return [run, busy, error]
}
