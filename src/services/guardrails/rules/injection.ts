/**
 * The prompt-injection rule set, versioned so a verdict names exactly what matched; keep patterns phrase-shaped
 * (docs/guardrails.md#injection-guard).
 */
export interface InjectionRule {
  readonly id: string
  readonly version: number
  readonly pattern: RegExp
  readonly description: string
  readonly appliesTo: ReadonlyArray<"user" | "tool">
}

export const RULESET_VERSION = "2025.1"

const BOTH = ["user", "tool"] as const

export const INJECTION_RULES: ReadonlyArray<InjectionRule> = [
  {
    id: "ignore-instructions",
    version: 1,
    pattern:
      /\b(?:ignore|disregard|forget|override|bypass)\s+(?:all\s+|any\s+|every\s+)?(?:of\s+)?(?:the\s+|your\s+|my\s+|these\s+|those\s+)?(?:previous|prior|above|earlier|preceding|original|system|initial)\s+(?:instructions?|prompts?|rules|directions|directives|guidelines|commands)\b/i,
    description: "asks the model to drop its earlier or system instructions",
    appliesTo: BOTH
  },
  {
    id: "system-prompt-exfiltration",
    version: 1,
    pattern:
      /\b(?:reveal|print|show|repeat|output|display|leak|dump|disclose|recite)\s+(?:me\s+)?(?:your\s+(?:(?:full|entire|complete|original|hidden|secret|initial|exact)\s+)*|the\s+(?:(?:full|entire|complete|original|hidden|secret|initial|exact)\s+)+)(?:system\s+(?:prompt|message|instructions)|hidden\s+instructions|initial\s+instructions|developer\s+message)\b|\bwhat\s+(?:is|are|was|were)\s+your\s+(?:system\s+prompt|hidden\s+instructions|initial\s+instructions)\b/i,
    description: "asks the model to disclose its system prompt or hidden instructions",
    appliesTo: BOTH
  },
  {
    id: "roleplay-jailbreak",
    version: 1,
    pattern:
      /\b(?:you\s+are\s+now|act\s+as|pretend\s+(?:to\s+be|you\s+are)|roleplay\s+as)\s+(?:DAN\b|an?\s+(?:unrestricted|unfiltered|uncensored|jailbroken)\b)|\bDAN\s+mode\b|\bdo\s+anything\s+now\b|\bdeveloper\s+mode\s+(?:enabled|activated|on)\b|\bjailbreak(?:ed)?\s+mode\b/i,
    description: "role-play jailbreak markers (DAN, unrestricted persona, developer mode)",
    appliesTo: BOTH
  },
  {
    id: "chat-template-injection",
    version: 1,
    pattern: /<\|im_start\|>\s*(?:system|assistant)|<\|(?:system|endoftext)\|>|<<SYS>>/i,
    description: "chat-template control tokens that forge a system or assistant turn",
    appliesTo: BOTH
  },
  {
    id: "tool-result-instructions",
    version: 1,
    pattern:
      /(?:^|\n)\s*(?:new|updated|important|urgent)\s+instructions?\s*(?:for\s+(?:the\s+)?(?:ai|assistant|model))?\s*:|\b(?:ai|assistant|model|llm)\s*[,:]\s*(?:you\s+must|you\s+should\s+now|now)\s+(?:ignore|disregard|send|forward|exfiltrate|delete|email|upload)\b/i,
    description: "instructions addressed to the model inside a tool result (indirect injection)",
    appliesTo: ["tool"]
  }
]
