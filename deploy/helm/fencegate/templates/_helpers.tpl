{{/*
The release's objects are named after it: "<release>" when it already says fencegate,
"<release>-fencegate" otherwise, cut to the 63 characters of a DNS label.
*/}}
{{- define "fencegate.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The name of an engine pool's objects: "<fullname>-<pool>". */}}
{{- define "fencegate.engineName" -}}
{{- printf "%s-%s" (include "fencegate.fullname" .root) .engine.name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels every object carries. */}}
{{- define "fencegate.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: fencegate
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{/* The gateways' pods: what their selectors match. */}}
{{- define "fencegate.gatewaySelector" -}}
app.kubernetes.io/name: fencegate
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: gateway
{{- end -}}

{{/* One engine pool's pods. */}}
{{- define "fencegate.engineSelector" -}}
app.kubernetes.io/name: vllm
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: engine
fencegate/pool: {{ .engine.name }}
{{- end -}}

{{/* The image of the gateway and the agent, by digest when one is given. */}}
{{- define "fencegate.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag }}
{{- end -}}
{{- end -}}

{{/* The headless Service an engine pool's gateways resolve (replicas_from.dns). */}}
{{- define "fencegate.engineService" -}}
{{- printf "%s-engines" (include "fencegate.engineName" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Where the agent secret is mounted, in gateways and agents alike. */}}
{{- define "fencegate.agentSecretDir" -}}/var/run/secrets/fencegate{{- end -}}

{{/*
The gateways' fencegate.yaml. Nothing secret goes in: the store's DSN comes from
FENCEGATE_STORE, the Redis URL from FENCEGATE_REDIS_URL (limits.backend_env), both set from
Secrets, and the agent secret is a file from a Secret. Keys are hashes.
*/}}
{{- define "fencegate.config" -}}
{{- $models := list -}}
{{- range .Values.engines -}}
{{- $m := deepCopy (default dict .gateway) -}}
{{- $_ := set $m "name" .model -}}
{{- $_ := set $m "replicas_from" (dict "dns" (include "fencegate.engineService" (dict "root" $ "engine" .)) "port" $.Values.agent.port "every" "10s" "agent" true "engine" "vllm" "scheme" "http") -}}
{{- $models = append $models $m -}}
{{- end -}}
{{- $limits := dict "max_body_bytes" .Values.limits.max_body_bytes "on_backend_error" .Values.limits.on_backend_error -}}
{{- if .Values.limits.redis -}}
{{- $_ := set $limits "backend_env" "FENCEGATE_REDIS_URL" -}}
{{- end -}}
{{- $auth := dict "admin_keys" .Values.auth.admin_keys -}}
{{- if .Values.auth.keys -}}
{{- $_ := set $auth "keys" .Values.auth.keys -}}
{{- end -}}
{{- $cfg := deepCopy .Values.gateway.config -}}
{{- $_ := set $cfg "listen" (printf "0.0.0.0:%d" (int .Values.gateway.port)) -}}
{{- $_ := set $cfg "admin_listen" (printf "0.0.0.0:%d" (int .Values.gateway.adminPort)) -}}
{{- $_ := set $cfg "models" $models -}}
{{- $_ := set $cfg "auth" $auth -}}
{{- $_ := set $cfg "limits" $limits -}}
{{- $_ := set $cfg "shutdown" (dict "drain_grace" (printf "%ds" (int .Values.gateway.drainGraceSeconds))) -}}
{{- $_ := set $cfg "agent_secret_file" (printf "%s/%s" (include "fencegate.agentSecretDir" .) .Values.secrets.agent.key) -}}
{{- toYaml $cfg -}}
{{- end -}}
