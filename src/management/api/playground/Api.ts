import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as Schema from "effect/Schema"
import { BadGateway, BadRequest, NotFound } from "../../../domain/errors.js"
import { CreatePreset, ImprovedPrompt, ImprovePrompt, Preset, PresetList, UpdatePreset } from "../../../domain/playground.js"
import { IdPath, PlaygroundAuth } from "../Principal.js"
import { EVERY_ROLE, KEY_HOLDERS, Roles } from "../Roles.js"

/** The playground's backend (docs/playground.md): presets and prompt improvement; auth follows REQUIRE_API_KEY. */
export class PlaygroundGroup extends HttpApiGroup.make("playground")
  .add(
    HttpApiEndpoint.post("improve", "/api/playground/improve-prompt")
      .setPayload(ImprovePrompt)
      .addSuccess(ImprovedPrompt)
      .addError(BadRequest)
      .addError(BadGateway)
  )
  .add(HttpApiEndpoint.get("listPresets", "/api/playground/presets").addSuccess(PresetList))
  .add(
    HttpApiEndpoint.post("createPreset", "/api/playground/presets")
      .setPayload(CreatePreset)
      .addSuccess(Preset, { status: 201 })
      .addError(BadRequest)
  )
  .add(HttpApiEndpoint.get("getPreset", "/api/playground/presets/:id").setPath(IdPath).addSuccess(Preset).addError(NotFound))
  .add(
    HttpApiEndpoint.put("updatePreset", "/api/playground/presets/:id")
      .setPath(IdPath)
      .setPayload(UpdatePreset)
      .addSuccess(Preset)
      .addError(BadRequest)
      .addError(NotFound)
  )
  .add(
    HttpApiEndpoint.del("removePreset", "/api/playground/presets/:id")
      .setPath(IdPath)
      .addSuccess(Schema.Void, { status: 204 })
      .addError(NotFound)
  )
  .middleware(PlaygroundAuth)
  .annotate(Roles, { read: EVERY_ROLE, write: KEY_HOLDERS }) {}
