import * as Schema from "effect/Schema"
import { strictStruct } from "./parse.js"

/**
 * Inputs a model cannot take (docs/bridge.md): the input modalities besides text, and the bridge
 * models that describe a part of one of them as text for a target that cannot take it. The
 * gateway's default is the settings' `bridge`, a combo's own is its `bridge`; off unless set.
 */

/** The input modalities a request part may carry besides text. */
export const MODALITIES = ["image", "audio", "pdf"] as const
export type Modality = (typeof MODALITIES)[number]
/** Every input modality, text first (text is always native). */
export type InputModality = "text" | Modality

/** A model id the gateway routes (provider/model, connection/model, a combo, an alias): the bridge model. */
const BridgeModel = (modality: Modality) =>
  Schema.NullOr(
    Schema.Trim.pipe(
      Schema.minLength(1, { message: () => `bridge.${modality} must be a model id (null: no bridge)` }),
      Schema.maxLength(300, { message: () => `bridge.${modality} must be at most 300 characters` }),
      Schema.pattern(/^[^\s]+$/, { message: () => `bridge.${modality} must not contain whitespace` })
    )
  )

/** Which model describes each modality's parts; null or absent: that modality is not bridged. */
export const BridgeModels = strictStruct({
  image: Schema.optionalWith(BridgeModel("image"), { default: () => null }),
  audio: Schema.optionalWith(BridgeModel("audio"), { default: () => null }),
  pdf: Schema.optionalWith(BridgeModel("pdf"), { default: () => null })
})
export type BridgeModels = typeof BridgeModels.Type

/** A combo's bridge: the modalities it names replace the gateway's default for that modality. */
export const ComboBridge = Schema.Struct({
  image: Schema.optional(BridgeModel("image")),
  audio: Schema.optional(BridgeModel("audio")),
  pdf: Schema.optional(BridgeModel("pdf"))
}).annotations({ parseOptions: { onExcessProperty: "error" as const } })
export type ComboBridge = typeof ComboBridge.Type

/** What a model or combo takes: natively, and through a bridge model (text always natively). */
export const Modalities = Schema.Struct({
  native: Schema.Array(Schema.Literal("text", ...MODALITIES)),
  bridged: Schema.Array(Schema.Literal(...MODALITIES))
})
export type Modalities = typeof Modalities.Type

/** The bridge model of `modality`: the combo's own when it names one (null turns it off), else the default. */
export const bridgeModelOf = (modality: Modality, defaults: BridgeModels, combo: ComboBridge | undefined): string | null => {
  const own = combo?.[modality]
  return own !== undefined ? own : defaults[modality]
}

/** The capabilities a model's input modalities are read from. */
export interface ModalityCapabilities {
  readonly vision: boolean
  readonly audio?: boolean | undefined
  readonly pdf?: boolean | undefined
}

/**
 * Whether a model with these capabilities takes `modality` natively. A model the catalog does not
 * describe (no spec, no custom model record) is taken to: nothing is known, so its parts go as sent.
 */
export const takes = (caps: ModalityCapabilities | undefined, modality: Modality): boolean =>
  caps === undefined ? true : modality === "image" ? caps.vision : modality === "audio" ? caps.audio === true : caps.pdf === true

/** The modalities a model takes natively, text first. */
export const nativeModalities = (caps: ModalityCapabilities | undefined): Array<InputModality> => [
  "text",
  ...MODALITIES.filter((m) => takes(caps, m))
]

/** What a model (or combo) whose native modalities are `native` takes: those, and the others a bridge model is configured for. */
export const modalitiesOf = (native: ReadonlyArray<InputModality>, bridgeOf: (m: Modality) => string | null): Modalities => ({
  native: [...native],
  bridged: MODALITIES.filter((m) => !native.includes(m) && bridgeOf(m) !== null)
})
