{{- define "alertd.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}{{ .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else -}}{{ printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}{{- end -}}
{{- end -}}

{{- define "alertd.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "alertd.labels" -}}
{{ include "alertd.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "alertd.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}{{ default (include "alertd.fullname" .) .Values.serviceAccount.name }}
{{- else -}}{{ default "default" .Values.serviceAccount.name }}{{- end -}}
{{- end -}}

{{- define "alertd.postgres" -}}{{ eq .Values.storage.backend "postgres" }}{{- end -}}

{{- define "alertd.replicas" -}}
{{- if eq .Values.storage.backend "postgres" -}}{{ .Values.storage.postgres.replicas }}{{- else -}}1{{- end -}}
{{- end -}}

{{/* alertd.yml: what the chart knows (listener, storage, secrets as files, rules) under the user's config. */}}
{{- define "alertd.config" -}}
{{- $secrets := "/etc/alertd/secrets/" -}}
{{- $tokens := list -}}
{{- range .Values.apiTokens -}}
{{- $tokens = append $tokens (dict "name" .name "role" .role "token_file" (printf "%s%s" $secrets .key)) -}}
{{- end -}}
{{- $cfg := dict
  "listen" (printf "0.0.0.0:%v" .Values.port)
  "data_dir" "/var/lib/alertd"
  "log" (dict "format" "json")
  "connections" (dict "max_open" .Values.maxConnections)
  "receiver" (dict "auth" (dict "bearer_token_file" (printf "%s%s" $secrets .Values.secrets.webhookTokenKey)))
  "api" (dict "auth" (dict "tokens" $tokens))
  "rules" (dict "site" (list "/etc/alertd/rules.d")) -}}
{{- if .Values.externalURL -}}{{- $_ := set $cfg "external_url" .Values.externalURL -}}{{- end -}}
{{- if eq .Values.storage.backend "postgres" -}}
{{- $pg := dict "backend" "postgres" "postgres_dsn" .Values.storage.postgres.dsn -}}
{{- if .Values.storage.postgres.passwordKey -}}{{- $_ := set $pg "postgres_password_file" (printf "%s%s" $secrets .Values.storage.postgres.passwordKey) -}}{{- end -}}
{{- $_ := set $cfg "storage" $pg -}}
{{- end -}}
{{- $notify := dict -}}
{{- with .Values.notify.slack -}}{{- if .enabled -}}
{{- $slack := dict "token_file" (printf "%s%s" $secrets .tokenKey) -}}
{{- if .signingSecretKey -}}{{- $_ := set $slack "signing_secret_file" (printf "%s%s" $secrets .signingSecretKey) -}}{{- end -}}
{{- if .linkKey -}}
{{- if not $.Values.externalURL -}}{{- fail "notify.slack.linkKey signs links to externalURL: set externalURL" -}}{{- end -}}
{{- $_ := set $slack "links" (dict "signing_secret_file" (printf "%s%s" $secrets .linkKey)) -}}
{{- end -}}
{{- $_ := set $notify "slack" $slack -}}
{{- end -}}{{- end -}}
{{- with .Values.notify.pagerduty -}}{{- if .enabled -}}
{{- $keys := dict -}}
{{- range $name, $key := .routingKeys -}}{{- $_ := set $keys $name (printf "%s%s" $secrets $key) -}}{{- end -}}
{{- $_ := set $notify "pagerduty" (dict "routing_keys_files" $keys) -}}
{{- end -}}{{- end -}}
{{- if $notify -}}{{- $_ := set $cfg "notify" $notify -}}{{- end -}}
{{- if .Values.rbac.create -}}{{- $_ := set $cfg "enrich" (dict "kube" (dict)) -}}{{- end -}}
{{- mustMergeOverwrite $cfg (deepCopy .Values.config) | toYaml -}}
{{- end -}}
