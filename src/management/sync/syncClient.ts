/**
 * A sync server's API client (src/management/sync/syncServer.ts loads this module with its first
 * call): the management API's cloud group alone, so that not every group's module is evaluated
 * for it, over the given fetch.
 */
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiClient from "@effect/platform/HttpApiClient"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import * as Effect from "effect/Effect"
import { CloudGroup } from "../api/cloud/Api.js"

/** The part of the management API a sync server's client calls. */
class SyncServerApi extends HttpApi.make("gateway").add(CloudGroup) {}

/** The client of the sync server at `serverUrl`, calling with `apiKey` through `fetch`. */
export const syncClient = (serverUrl: string, apiKey: string, fetch: typeof globalThis.fetch) =>
  HttpApiClient.make(SyncServerApi, {
    baseUrl: serverUrl.replace(/\/+$/, ""),
    transformClient: (c) => HttpClient.mapRequest(c, HttpClientRequest.bearerToken(apiKey))
  }).pipe(Effect.provide(FetchHttpClient.layer), Effect.provideService(FetchHttpClient.Fetch, fetch))

export type SyncClient = Effect.Effect.Success<ReturnType<typeof syncClient>>
