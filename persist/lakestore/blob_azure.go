//go:build lakeshore_azure

package lakestore

// azblob:// buckets (Azure Blob Storage), in a build with the tag lakeshore_azure
// (TagAzure): the driver links the Azure SDK, so the default build leaves it out
// (blob.go). Credentials: the AZURE_STORAGE_* environment variables or the Azure SDK's
// default credential chain.
import _ "gocloud.dev/blob/azureblob"
