import type { paths } from "../../api/schema"

/** The JSON answer of a route (200 or 201), from the generated OpenAPI types. */
export type Res<P extends keyof paths, M extends keyof paths[P]> = paths[P][M] extends {
  responses: { 200: { content: { "application/json": infer T } } }
}
  ? T
  : paths[P][M] extends { responses: { 201: { content: { "application/json": infer T } } } }
    ? T
    : never

/** The query parameters of a GET route. */
export type Query<P extends keyof paths> = paths[P] extends { get: { parameters: { query?: infer Q } } } ? NonNullable<Q> : never
